//go:build linux

package netimpair

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func newLink(t *testing.T) *Link {
	t.Helper()
	l, err := New()
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("%v (run as root, as CI does, to test the impaired link)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// echo serves an echo server in the namespace and returns its address.
func echo(t *testing.T, l *Link) string {
	t.Helper()
	ln, err := l.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// roundTrips sends n one-byte pings and returns the shortest round trip.
func roundTrips(t *testing.T, c net.Conn, n int) time.Duration {
	t.Helper()
	return roundTripsWithin(t, c, n, 20*time.Second)
}

// roundTripsWithin is roundTrips with each round trip bounded by d.
func roundTripsWithin(t *testing.T, c net.Conn, n int, d time.Duration) time.Duration {
	t.Helper()
	best := time.Hour
	b := []byte{1}
	for range n {
		start := time.Now()
		c.SetDeadline(time.Now().Add(d))
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(start))
	}
	return best
}

// TestLinkDelay: with 50 ms each way and no jitter no round trip is
// shorter than 100 ms (a lower bound the impairment guarantees, not a
// timing threshold of the machine); healed, the same connection goes on
// and the delayer (where it is the method) counted the packets.
func TestLinkDelay(t *testing.T) {
	for _, force := range []string{"", "nfqueue"} {
		t.Run("method="+force, func(t *testing.T) {
			t.Setenv("TOLLGATE_NETIMPAIR", force)
			l := newLink(t)
			if force == "" && !l.HasNetem() {
				t.Skip("no tc netem in this kernel: the nfqueue subtest covers the fallback")
			}
			c, err := net.DialTimeout("tcp", echo(t, l), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			roundTrips(t, c, 3)
			a, err := l.Delay(50*time.Millisecond, 0)
			if err != nil {
				t.Fatal(err)
			}
			if rtt := roundTrips(t, c, 5); rtt < 100*time.Millisecond {
				t.Errorf("round trip %v under a 50 ms delay each way (%s)", rtt, a.Method)
			}
			stats, err := l.Heal(a)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s", a.Method, stats)
			if m := regexp.MustCompile(`^(\d+) packets`).FindStringSubmatch(stats); m == nil || m[1] == "0" {
				t.Errorf("stats %q: no packets counted", stats)
			}
			roundTrips(t, c, 3)
		})
	}
}

// TestLinkReorder: the delayer's reordering makes packets of one flow
// leave out of order (counted); TCP still delivers the stream intact.
func TestLinkReorder(t *testing.T) {
	t.Setenv("TOLLGATE_NETIMPAIR", "nfqueue")
	l := newLink(t)
	c, err := net.DialTimeout("tcp", echo(t, l), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := l.Reorder(20*time.Millisecond, 25)
	if err != nil {
		t.Fatal(err)
	}
	// Many small segments in flight at once, so that some overtake others.
	const n = 2000
	go func() {
		for i := range n {
			c.Write([]byte{byte(i)})
			time.Sleep(100 * time.Microsecond)
		}
	}()
	got := make([]byte, n)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	for i, b := range got {
		if b != byte(i) {
			t.Fatalf("byte %d is %d: the stream was not delivered in order", i, b)
		}
	}
	stats, err := l.Heal(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s", a.Method, stats)
	m := regexp.MustCompile(`, (\d+) \(`).FindStringSubmatch(stats)
	if m == nil {
		t.Fatalf("stats %q: no reorder count", stats)
	}
	if r, _ := strconv.Atoi(m[1]); r == 0 {
		t.Errorf("nothing reordered: %s", stats)
	}
}

// TestLinkBlackhole: while the link is a blackhole a dial gets no answer;
// healed, the connection made before it carries data again.
func TestLinkBlackhole(t *testing.T) {
	l := newLink(t)
	addr := echo(t, l)
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := l.Blackhole()
	if err != nil {
		t.Fatal(err)
	}
	if d, err := net.DialTimeout("tcp", addr, 500*time.Millisecond); err == nil {
		d.Close()
		t.Fatal("a dial across the blackhole succeeded")
	} else if !os.IsTimeout(err) {
		t.Fatalf("dial across the blackhole: %v, want a timeout", err)
	}
	stats, err := l.Heal(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s", a.Method, stats)
	if stats == "0 packets dropped" {
		t.Errorf("blackhole counted no drops")
	}
	roundTrips(t, c, 1)
}

// TestLinkLoss: at 10% loss some packets are dropped (counted) and TCP
// still delivers. A round trip fails one attempt when its segment or the
// reply is lost (p = 1 - 0.9² = 0.19), and TCP backs off from a 200 ms
// retransmission timeout, doubling: 60 s allows 8 failed attempts in a
// row (0.19⁹ ≈ 3e-7 per round trip). 50 round trips dropped 5-14
// packets in three runs, so 100 drop ~20 on average and none is ~e⁻²⁰.
// (At 30% loss and 20 s, 7 failures in a row, ~1% per round trip,
// failed a CI run.)
func TestLinkLoss(t *testing.T) {
	t.Setenv("TOLLGATE_NETIMPAIR", "nfqueue") // nftables loss; netem's is tc's own
	l := newLink(t)
	c, err := net.DialTimeout("tcp", echo(t, l), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := l.Loss(10)
	if err != nil {
		t.Fatal(err)
	}
	roundTripsWithin(t, c, 100, 60*time.Second)
	stats, err := l.Heal(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s", a.Method, stats)
	if stats == "0 packets dropped" {
		t.Errorf("10%% loss dropped nothing")
	}
}

// TestInNSKeepsThread: a child started with Pdeathsig from a thread that
// then joins the namespace lives on (the fault suite's gateway used to be
// SIGKILLed when InNS ended its thread in the namespace).
func TestInNSKeepsThread(t *testing.T) {
	l := newLink(t)
	cmd := exec.Command("sleep", "30")
	exited := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // fork the child from this thread, then run InNS on it
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		go func() { exited <- cmd.Wait() }()
		err := l.inNSHere(func() error { return nil })
		runtime.UnlockOSThread()
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// The goroutine has ended; had its thread ended with it, the kernel
	// would have SIGKILLed the child at once.
	select {
	case err := <-exited:
		t.Fatalf("child exited (%v) after its forking thread joined the namespace", err)
	case <-time.After(time.Second):
	}
}
