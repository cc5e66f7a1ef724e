package proxy_test

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestIdleConnectionMemory measures what an idle client connection costs
// the gateway (heap and goroutine stacks), with 1000 connections that
// each made one request and then went quiet. Reported, and bounded
// generously (the target, 32 KiB, is checked in the README's numbers):
// the assertion only catches a regression to per-connection buffers that
// are never given back.
func TestIdleConnectionMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 1000 connections")
	}
	srv := startBuiltin(t)
	measure := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse + m.StackInuse
	}
	const n = 1000
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// Warm up pools and the broker.
	warm := dialRaw(t, srv.Addr(0).String())
	warm.roundTrip(kmsg.NewPtrApiVersionsRequest())
	before := measure()
	for range n {
		rc := dialRaw(t, srv.Addr(0).String())
		if _, _, ok := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()); !ok {
			t.Fatal("connection refused")
		}
		conns = append(conns, rc.c)
	}
	time.Sleep(100 * time.Millisecond) // let the write loops park
	after := measure()
	per := float64(after-before) / n
	t.Logf("idle connection: %.1f KiB of gateway memory (heap + stacks, client side included)", per/1024)
	if per > 64<<10 {
		t.Errorf("%.0f KiB per idle connection", per/1024)
	}
}
