package policy

import (
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const ratePolicy = `
policy:
  rules:
    - name: slow-producers
      match: { client_id: { prefix: batch- }, api: [Produce] }
      rate: { produce_bytes_per_second: 1MB, burst: 1MB, per: client_id }
`

// TestProduceThrottleConverges: a client that would send 10 MB/s against
// a 1 MB/s rate, muted for each throttle it is given, ends up near 1 MB/s.
func TestProduceThrottleConverges(t *testing.T) {
	e := mustParse(t, ratePolicy)
	s := subj("default", "10.0.0.1", "batch-1", "")
	const frame = 100_000
	now := time.Unix(1000, 0)
	start := now
	sent := 0
	throttled := 0
	for now.Sub(start) < 20*time.Second {
		v := e.Check(&Request{Subject: s, Key: 0, Version: 9, Size: frame, Now: now})
		if v.Action != Allow {
			t.Fatalf("rate rules never deny: %v", v.Action)
		}
		sent += frame
		now = now.Add(10 * time.Millisecond) // the client's own pace: 10 MB/s
		if v.Throttle > 0 {
			throttled++
			if v.ThrottleRule != "slow-producers" {
				t.Fatalf("throttle rule %q", v.ThrottleRule)
			}
			now = now.Add(v.Throttle) // the gateway stops reading
		}
	}
	got := float64(sent) / now.Sub(start).Seconds()
	if got < 0.95e6 || got > 1.15e6 {
		t.Fatalf("converged to %.0f B/s; want about 1e6 (throttled %d times)", got, throttled)
	}
	// Another client id has its own budget; other keys are not charged.
	if v := e.Check(&Request{Subject: subj("default", "10.0.0.1", "batch-2", ""), Key: 0, Version: 9, Size: frame, Now: now}); v.Throttle != 0 {
		t.Errorf("fresh client throttled %v", v.Throttle)
	}
	if v := e.Check(&Request{Subject: s, Key: 1, Version: 9, Size: frame, Now: now}); v.Throttle != 0 {
		t.Errorf("fetch charged to a produce rate: %v", v.Throttle)
	}
}

// A frame larger than the burst is admitted and puts the bucket in debt
// for the whole frame (one frame always fits).
func TestOversizeFrame(t *testing.T) {
	e := mustParse(t, ratePolicy)
	s := subj("default", "10.0.0.1", "batch-1", "")
	now := time.Unix(1000, 0)
	v := e.Check(&Request{Subject: s, Key: 0, Version: 9, Size: 3_000_000, Now: now})
	// 1 MB of burst, 2 MB of debt at 1 MB/s.
	if v.Throttle < 1900*time.Millisecond || v.Throttle > 2100*time.Millisecond {
		t.Fatalf("throttle %v; want about 2s", v.Throttle)
	}
}

func TestRequestRateAndFetchBytes(t *testing.T) {
	e := mustParse(t, `
policy:
  rules:
    - name: chatty
      match: { address: 10.0.0.0/8 }
      rate: { requests_per_second: 10, fetch_bytes_per_second: 1MB, fetch_burst: 1MB, per: address }
`)
	s := subj("default", "10.0.0.1", "c", "")
	now := time.Unix(1000, 0)
	var last time.Duration
	for range 15 {
		last = e.Check(&Request{Subject: s, Key: 18, Version: 3, Now: now}).Throttle
	}
	if last < 400*time.Millisecond || last > 600*time.Millisecond {
		t.Errorf("15 requests at once against 10/s (burst 10): throttle %v, want 500ms", last)
	}
	d, rule := e.OnResponse(s, 1, 3_000_000, now)
	if rule != "chatty" || d < 1900*time.Millisecond || d > 2100*time.Millisecond {
		t.Errorf("fetch 3MB against 1MB/s: %v %q", d, rule)
	}
	if d, _ := e.OnResponse(subj("default", "192.168.0.1", "c", ""), 1, 3_000_000, now); d != 0 {
		t.Errorf("non-matching address throttled %v", d)
	}
}

// TestBoundedLimiters: 20,000 client ids do not make a rule hold more
// than MaxKeysPerRule buckets, and idle full buckets go first.
func TestBoundedLimiters(t *testing.T) {
	e := mustParse(t, ratePolicy)
	l := e.rules[0].rate
	now := time.Unix(1000, 0)
	for i := range 2 * MaxKeysPerRule {
		s := subj("default", "10.0.0.1", fmt.Sprintf("batch-%d", i), "")
		e.Check(&Request{Subject: s, Key: 0, Version: 9, Size: 10, Now: now})
	}
	if n := l.size(); n > MaxKeysPerRule {
		t.Fatalf("%d buckets; cap %d", n, MaxKeysPerRule)
	}
	// Long idle: new keys replace the idle ones, so the map shrinks
	// towards what is in use.
	later := now.Add(time.Hour)
	for i := range 100 {
		e.Check(&Request{Subject: subj("default", "10.0.0.1", fmt.Sprintf("batch-new-%d", i), ""), Key: 0, Version: 9, Size: 10, Now: later})
	}
	if n := l.size(); n > MaxKeysPerRule-100 {
		t.Errorf("idle buckets not expired: %d", n)
	}
}

// TestReloadKeepsBudgets: a rule with the same name and rate keeps its
// limiter across CompileFrom; a changed rate starts fresh.
func TestReloadKeepsBudgets(t *testing.T) {
	c, err := configs.Parse([]byte(ratePolicy), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e1, _, err := Compile(c.Policy)
	if err != nil {
		t.Fatal(err)
	}
	s := subj("default", "10.0.0.1", "batch-1", "")
	now := time.Unix(1000, 0)
	e1.Check(&Request{Subject: s, Key: 0, Version: 9, Size: 2_000_000, Now: now})
	e2, _, err := CompileFrom(e1, c.Policy)
	if err != nil {
		t.Fatal(err)
	}
	if v := e2.Check(&Request{Subject: s, Key: 0, Version: 9, Size: 1000, Now: now}); v.Throttle < time.Second {
		t.Errorf("budget reset by reload: throttle %v", v.Throttle)
	}
	c.Policy.Rules[0].Rate.ProduceBytesPerSecond = 2 * configs.MiB
	e3, _, err := CompileFrom(e2, c.Policy)
	if err != nil {
		t.Fatal(err)
	}
	if v := e3.Check(&Request{Subject: s, Key: 0, Version: 9, Size: 1000, Now: now}); v.Throttle != 0 {
		t.Errorf("changed rate kept the old budget: %v", v.Throttle)
	}
}

func TestSetThrottle(t *testing.T) {
	r := kmsg.NewPtrProduceResponse()
	r.Version, r.ThrottleMillis = 9, 50
	SetThrottle(r, 10*time.Millisecond)
	if r.ThrottleMillis != 50 {
		t.Errorf("lowered the upstream's throttle: %d", r.ThrottleMillis)
	}
	SetThrottle(r, 1500*time.Microsecond*100)
	if r.ThrottleMillis != 150 {
		t.Errorf("throttle %d, want 150", r.ThrottleMillis)
	}
	SetThrottle(kmsg.NewPtrSASLHandshakeResponse(), time.Second) // no field: no panic
	for _, c := range []struct {
		key, version int16
		want         bool
	}{{0, 5, false}, {0, 6, true}, {1, 7, false}, {1, 8, true}, {3, 5, false}, {3, 6, true}, {17, 1, true}, {60, 0, true}} {
		if got := AppliesAfterResponse(c.key, c.version); got != c.want {
			t.Errorf("AppliesAfterResponse(%d, %d) = %v", c.key, c.version, got)
		}
	}
}

// TestConcurrent runs Check and OnResponse on one subject from several
// goroutines (run with -race).
func TestConcurrent(t *testing.T) {
	e := mustParse(t, "policy:\n  rules:\n    - {name: r, match: {}, rate: {requests_per_second: 1000, produce_bytes_per_second: 1MiB, fetch_bytes_per_second: 1MiB, per: shared}}\n    - {name: d, match: {topic: [x]}, action: deny}\n")
	s := subj("default", "10.0.0.1", "c", "")
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 200 {
				e.Check(&Request{Subject: s, Key: 0, Version: 9, Size: 1000 * g, Body: produceReq(9, "x", "y"), Now: time.Unix(1000, int64(i))})
				e.OnResponse(s, 1, 5000, time.Unix(1000, int64(i)))
			}
		}()
	}
	for range 4 {
		<-done
	}
}
