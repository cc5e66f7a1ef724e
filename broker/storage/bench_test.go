package storage

import (
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

func benchBatch(b *testing.B) []byte {
	sp := dataSpec(16)
	sp.valueSize = 1024 // 16 x 1 KiB records, ~16.5 KiB batch
	return makeBatch(b, sp)
}

// BenchmarkAppend appends ~16 KiB batches. Under "always" the parallel
// variant shows group commit: concurrent appenders share fsyncs.
func BenchmarkAppend(b *testing.B) {
	for _, p := range []FsyncPolicy{FsyncNever, FsyncAlways} {
		for _, par := range []int{1, 8} {
			name := p.String()
			if par > 1 {
				name += "-parallel8"
			}
			b.Run(name, func(b *testing.B) {
				s := NewSyncer(p, 0)
				defer s.Close()
				l := openTest(b, b.TempDir(), smallConfig(), s)
				batch := benchBatch(b)
				b.SetBytes(int64(len(batch)))
				b.ResetTimer()
				var wg sync.WaitGroup
				per := (b.N + par - 1) / par
				for range par {
					wg.Add(1)
					go func() {
						defer wg.Done()
						buf := append([]byte(nil), batch...)
						for range per {
							_, d, err := l.Append(buf, AppendOptions{})
							if err != nil {
								b.Error(err)
								return
							}
							if err := <-d; err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
			})
		}
	}
}

// BenchmarkRead serves 1 MiB fetches over loopback TCP with sendfile.
func BenchmarkRead(b *testing.B) {
	l := openTest(b, b.TempDir(), smallConfig(), nil)
	batch := benchBatch(b)
	for range 256 { // ~4 MiB
		if _, _, err := l.Append(append([]byte(nil), batch...), AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.Copy(io.Discard, c)
		c.Close()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	hw := l.HighWatermark()
	b.SetBytes(1 << 20)
	b.ResetTimer()
	off := int64(0)
	for range b.N {
		r, err := l.Read(off, 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.WriteTo(c); err != nil {
			b.Fatal(err)
		}
		r.Release()
		off = (off + 16*64) % hw
	}
}

// BenchmarkClean measures the cleaner's cost: a 32 MiB log of 1 KiB
// keyed records over 4096 keys (each key about 8 versions) in 1 MiB
// segments, cleaned once per iteration (a fresh copy each time), and
// reports the bytes reclaimed per CPU-second of the process (getrusage:
// the cleaner is all that runs while it is timed).
//
//	go test ./broker/storage -run '^$' -bench BenchmarkClean -benchtime 3x
func BenchmarkClean(b *testing.B) {
	var cpu time.Duration
	var reclaimed int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cfg := smallConfig()
		cfg.Compact, cfg.SegmentBytes = true, 1<<20
		l := openTest(b, b.TempDir(), cfg, nil)
		value := make([]byte, 1000)
		for off := 0; off < 32<<10; off += 16 {
			var recs []kv
			for j := 0; j < 16; j++ {
				recs = append(recs, kv{key: []byte(fmt.Sprintf("key-%08d", (off+j)%4096)), value: value})
			}
			if _, _, err := l.Append(makeKeyed(b, plainKeyed(), recs), AppendOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		before := processCPU()
		b.StartTimer()
		res, err := l.Clean(CleanOptions{})
		b.StopTimer()
		cpu += processCPU() - before
		if err != nil || !res.Cleaned {
			b.Fatalf("clean: %+v %v", res, err)
		}
		reclaimed += res.BytesBefore - res.BytesAfter
		l.Close()
	}
	b.ReportMetric(float64(reclaimed)/(1<<20)/cpu.Seconds(), "reclaimed-MB/cpu-s")
	b.ReportMetric(float64(reclaimed)/float64(b.N)/(1<<20), "reclaimed-MB/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
