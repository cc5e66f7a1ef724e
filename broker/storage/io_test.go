package storage

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// WriteTo through a real loopback TCP connection uses sendfile; the bytes
// that arrive are the stored batches. Several MiB make the socket buffer
// fill, exercising the EAGAIN wait.
func TestSendfileLoopback(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	l := openTest(t, t.TempDir(), cfg, nil)
	for range 400 {
		sp := dataSpec(16)
		sp.valueSize = 1024
		mustAppend(t, l, makeBatch(t, sp))
	}
	r, err := l.Read(0, 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if len(r.Sections) < 2 {
		t.Fatalf("read spans %d sections, want several segments", len(r.Sections))
	}
	want, err := r.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).SetWriteBuffer(64 << 10)
	c.SetWriteDeadline(time.Now().Add(20 * time.Second))
	n, err := r.WriteTo(c)
	c.Close()
	if err != nil || n != int64(r.Size) {
		t.Fatalf("WriteTo = %d, %v; size %d", n, err, r.Size)
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("received %d bytes differing from the %d stored", len(b), len(want))
	}
	// The pread fallback (a plain writer) gives the same bytes.
	var buf bytes.Buffer
	if _, err := r.WriteTo(&buf); err != nil || !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("fallback copy: %v", err)
	}
}

// A read keeps its segments readable after retention unlinks them.
func TestReadSurvivesSegmentDeletion(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 2 << 10
	dir := t.TempDir()
	l := openTest(t, dir, cfg, nil)
	for range 60 {
		mustAppend(t, l, makeBatch(t, dataSpec(2)))
	}
	r, err := l.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := r.AppendTo(nil)
	if _, err := l.DeleteRecords(l.HighWatermark()); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.log")); len(m) != 1 {
		t.Fatalf("%d segment files after deleting all records", len(m))
	}
	var buf bytes.Buffer
	if _, err := r.WriteTo(&buf); err != nil || !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("read of deleted segments: %v", err)
	}
	r.Release()
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}

// Concurrent appenders and long-polling readers under FsyncAlways: readers
// see every offset exactly once, in order, and never past the high
// watermark.
func TestConcurrentAppendRead(t *testing.T) {
	s := NewSyncer(FsyncAlways, 0)
	defer s.Close()
	cfg := smallConfig()
	cfg.SegmentBytes = 16 << 10
	l := openTest(t, t.TempDir(), cfg, s)
	const writers, perWriter, recs = 4, 100, 3
	total := int64(writers * perWriter * recs)
	var wg sync.WaitGroup
	errs := make(chan error, writers+2)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				sp := dataSpec(recs)
				sp.pid, sp.epoch, sp.seq = int64(w), 0, int32(i*recs)
				_, durable, err := l.Append(makeBatch(t, sp), AppendOptions{})
				if err == nil {
					err = <-durable
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := int64(0)
			deadline := time.After(30 * time.Second)
			for next < total {
				select {
				case <-l.Wait(next):
				case <-deadline:
					errs <- io.ErrNoProgress
					return
				}
				r, err := l.Read(next, 4096)
				if err != nil {
					errs <- err
					return
				}
				b, err := r.AppendTo(nil)
				hw := r.HighWatermark
				r.Release()
				if err != nil {
					errs <- err
					return
				}
				for len(b) > 0 {
					h, err := checkBatch(b)
					if err != nil {
						errs <- err
						return
					}
					if h.baseOffset != next || h.lastOffset() >= hw {
						t.Errorf("batch [%d,%d] read at %d with hw %d", h.baseOffset, h.lastOffset(), next, hw)
						errs <- io.ErrUnexpectedEOF
						return
					}
					next = h.lastOffset() + 1
					b = b[h.size():]
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if l.LogEndOffset() != total || l.HighWatermark() != total {
		t.Fatalf("leo %d hw %d want %d", l.LogEndOffset(), l.HighWatermark(), total)
	}
}
