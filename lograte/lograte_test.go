package lograte

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the handler and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			panic(err)
		}
		out = append(out, m)
	}
	return out
}

func newTestLogger(o Options) (*Logger, *syncBuffer) {
	buf := &syncBuffer{}
	o.Interval = time.Hour // the test ends intervals with Flush
	return New(slog.New(slog.NewJSONHandler(buf, nil)), o), buf
}

func TestBurstThenSummary(t *testing.T) {
	l, buf := newTestLogger(Options{Burst: 3, TopAddrs: 2})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				l.Warn("refused", fmt.Sprintf("10.0.0.%d:%d", g, 1000+i), "connection refused")
			}
		}()
	}
	wg.Wait()
	l.Warn("malformed", "10.0.0.9:1", "bad frame")
	if got := l.Suppressed()["refused"]; got != 2000-3 {
		t.Fatalf("suppressed refused = %d, want %d", got, 2000-3)
	}
	l.Close()
	lines := buf.lines()
	if len(lines) != 3+1+1 {
		t.Fatalf("got %d lines, want 5: %v", len(lines), lines)
	}
	sum := lines[len(lines)-1]
	if sum["msg"] != "repeated log lines suppressed" || sum["suppressed"] != float64(1997) || sum["by_reason"] != "refused=1997" {
		t.Fatalf("summary = %v", sum)
	}
	busiest, _ := sum["busiest"].(string)
	// Four addresses with ~500 each: two are named, the rest folded into other.
	if strings.Count(busiest, "10.0.0.") != 2 || !strings.Contains(busiest, "other=") {
		t.Fatalf("busiest = %q", busiest)
	}
	for _, l := range lines[:3] {
		if l["reason"] != "refused" || !strings.HasPrefix(l["client"].(string), "10.0.0.") {
			t.Fatalf("full line = %v", l)
		}
	}
}

func TestNewIntervalLogsAgain(t *testing.T) {
	l, buf := newTestLogger(Options{Burst: 1})
	defer l.Close()
	l.Warn("r", "", "one")
	l.Warn("r", "", "two")
	l.Flush()
	l.Warn("r", "", "three")
	var msgs []string
	for _, m := range buf.lines() {
		msgs = append(msgs, m["msg"].(string))
	}
	want := []string{"one", "repeated log lines suppressed", "three"}
	if strings.Join(msgs, "|") != strings.Join(want, "|") {
		t.Fatalf("msgs = %q, want %q", msgs, want)
	}
}

func TestNothingSuppressedNoSummary(t *testing.T) {
	l, buf := newTestLogger(Options{})
	l.Info("r", "1.2.3.4:5", "x")
	l.Close()
	if n := len(buf.lines()); n != 1 {
		t.Fatalf("%d lines, want 1", n)
	}
}

func TestAddressesBounded(t *testing.T) {
	l, _ := newTestLogger(Options{Burst: 1})
	defer l.Close()
	for i := 0; i < maxTrackedAddrs+500; i++ {
		l.Warn("r", fmt.Sprintf("10.%d.%d.1:1", i/256, i%256), "x")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.addrs) > maxTrackedAddrs || l.other == 0 {
		t.Fatalf("addrs=%d other=%d", len(l.addrs), l.other)
	}
}

func TestHostOf(t *testing.T) {
	for in, want := range map[string]string{"1.2.3.4:5": "1.2.3.4", "[::1]:9": "::1", "host": "host", "": "unknown"} {
		if got := hostOf(in); got != want {
			t.Errorf("hostOf(%q) = %q, want %q", in, got, want)
		}
	}
}
