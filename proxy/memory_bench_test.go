package proxy_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// Memory benchmarks for hostile requests (issue 15). They measure memory,
// not time: run one at a time so the process's peak RSS is theirs,
//
//	go test -run XXX -bench 'Memory' -benchtime 1x ./proxy/
//
// and read peak_rss_MB / heap_MB from the report.

// procStatusKB reads a "VmHWM:" style line of /proc/self/status, in KiB.
func procStatusKB(b *testing.B, field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// resetPeakRSS makes VmHWM start again from the current RSS (Linux 4.0+).
func resetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// BenchmarkMemoryMetadataDuplicateNames: one Metadata v4 naming the empty
// topic 2,000,000 times (a 4 MB frame) through the gateway to the built-in
// broker. Before de-duplication it was decoded into 2 million structs and
// answered with 2 million entries (5 million took RSS to 2.18 GB); the
// target is a peak under 200 MB.
func BenchmarkMemoryMetadataDuplicateNames(b *testing.B) {
	const names = 2_000_000
	srv := startBuiltin(b)
	body := binary.BigEndian.AppendUint32(nil, names)
	body = append(body, make([]byte, 2*names)...) // each an empty name: int16 length 0
	body = append(body, 0)                        // AllowAutoTopicCreation false
	hdr := []byte{0, 3, 0, 4, 0, 0, 0, 1, 0xff, 0xff}
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)+len(body)))
	frame = append(append(frame, hdr...), body...)
	body = nil
	c, err := net.Dial("tcp", srv.Addr(0).String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var peak, respLen, topics int64
	runtime.GC()
	before := procStatusKB(b, "VmRSS")
	b.ResetTimer()
	for range b.N {
		resetPeakRSS()
		c.SetDeadline(time.Now().Add(2 * time.Minute))
		if _, err := c.Write(frame); err != nil {
			b.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			b.Fatalf("no Metadata response: %v", err)
		}
		resp := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, resp); err != nil {
			b.Fatal(err)
		}
		peak = max(peak, procStatusKB(b, "VmHWM"))
		m := kmsg.NewPtrMetadataResponse()
		m.SetVersion(4)
		if err := m.ReadFrom(resp[4:]); err != nil {
			b.Fatal(err)
		}
		respLen, topics = int64(len(resp)), int64(len(m.Topics))
	}
	b.ReportMetric(float64(before)/1024, "rss_before_MB")
	b.ReportMetric(float64(peak)/1024, "peak_rss_MB")
	b.ReportMetric(float64(respLen), "response_bytes")
	b.ReportMetric(float64(topics), "response_topics")
}

// BenchmarkMemoryDeclaredFrames: 100 connections each declare a 100 MiB
// Produce (the default max_frame_bytes) and send 70 KiB of it. Before the
// fix each allocated the declared size up front (200 such took the heap
// to 21 GB); now each holds what it sent, about 128 KiB of body buffer
// plus its 64 KiB read buffer. The target is a heap under 1 GiB.
func BenchmarkMemoryDeclaredFrames(b *testing.B) {
	const conns, declared, sent = 100, 100 << 20, 70 << 10
	srv := startBuiltin(b)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "declared"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = make([]byte, 128<<10)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	head := kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)[:sent]
	binary.BigEndian.PutUint32(head, declared)
	avail0, _ := proxy.BudgetForTest(srv)
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b.ResetTimer()
	for range b.N {
		var cs []net.Conn
		for range conns {
			c, err := net.Dial("tcp", srv.Addr(0).String())
			if err != nil {
				b.Fatal(err)
			}
			c.Write(head)
			cs = append(cs, c)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			avail, _ := proxy.BudgetForTest(srv)
			if avail0-avail >= conns*(128<<10) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("only %d KiB reserved", (avail0-avail)>>10)
			}
			time.Sleep(10 * time.Millisecond)
		}
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		avail, _ := proxy.BudgetForTest(srv)
		b.ReportMetric(float64(m.HeapInuse)/(1<<20), "heap_MB")
		b.ReportMetric(float64(m.HeapInuse-min(m.HeapInuse, m0.HeapInuse))/(1<<20), "heap_growth_MB")
		b.ReportMetric(float64(avail0-avail)/(1<<20), "budget_reserved_MB")
		b.ReportMetric(float64(conns)*declared/(1<<20), "declared_MB")
		for _, c := range cs {
			c.Close()
		}
	}
}
