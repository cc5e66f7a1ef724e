package proxy_test

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFramesAcrossTheIdleRead: the idle wait for a frame reads up to 512
// bytes into the session (session.go, idleRead) and replays them to the
// read buffer. Frames written back to back, one straddling that read's end
// and one whose size prefix is split across writes, are each answered,
// in order, with their own correlation id.
func TestFramesAcrossTheIdleRead(t *testing.T) {
	c := startUpstream(t, 1)
	srv := startGateway(t, c)
	conn, err := net.DialTimeout("tcp", srv.Addr(0).String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	var stream []byte
	var corrs []int32
	// ApiVersions requests whose client ids give frames of ~40, ~700 and
	// ~1,500 bytes.
	add := func(clientID int) {
		f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(strings.Repeat("c", clientID)))
		corr := int32(len(corrs) + 1)
		stream = append(stream, f.AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), corr)...)
		corrs = append(corrs, corr)
	}
	for _, id := range []int{10, 700, 10, 100, 1500, 10} {
		add(id)
	}
	// Cut the stream inside the first frame's size prefix, then at 512-byte
	// steps, so each write ends inside a frame.
	cuts := []int{2}
	for at := 512; at < len(stream); at += 512 {
		cuts = append(cuts, at)
	}
	cuts = append(cuts, len(stream))
	go func() {
		from := 0
		for _, to := range cuts {
			if _, err := conn.Write(stream[from:to]); err != nil {
				return
			}
			from = to
		}
	}()
	for i, want := range corrs {
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			t.Fatalf("response %d of %d: %v", i+1, len(corrs), err)
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, frame); err != nil {
			t.Fatalf("response %d: truncated: %v", i+1, err)
		}
		if got := int32(binary.BigEndian.Uint32(frame)); got != want {
			t.Fatalf("response %d: correlation id %d, want %d", i+1, got, want)
		}
	}
}

// TestLargeProduceForwardedFromItsHead: a Produce larger than the read
// buffer is forwarded as its buffered head plus a splice of the rest
// (forward). Frames written in uneven pieces, the second starting in the
// same write as the first one's end, land whole: kfake checks each batch's
// CRC and answers both without an error.
func TestLargeProduceForwardedFromItsHead(t *testing.T) {
	c := startUpstream(t, 1, kfake.SeedTopics(1, "head"))
	srv := startGateway(t, c)
	conn, err := net.DialTimeout("tcp", srv.Addr(0).String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	a, b := produceFrame("head", 300<<10, 1), produceFrame("head", 200<<10, 2)
	stream := append(a, b...)
	cuts := []int{300, 70 << 10, len(a) + 100, len(a) + 1000, len(stream)}
	go func() {
		from := 0
		for _, to := range cuts {
			if _, err := conn.Write(stream[from:to]); err != nil {
				return
			}
			from = to
		}
	}()
	for i := range 2 {
		if code := readProduceCode(t, conn); code != 0 {
			t.Fatalf("produce %d: error code %d", i+1, code)
		}
	}
	if hw := c.PartitionInfo("head", 0).HighWatermark; hw != 2 {
		t.Fatalf("high watermark %d, want 2", hw)
	}
}
