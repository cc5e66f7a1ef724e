//go:build linux

// Package netimpair puts a service behind an impaired network link for
// the fault suite (issue 23): a network namespace joined to the host by a
// veth pair, listeners created inside it from this process, and
// impairments of that link: delay with jitter, reordering, random loss and
// a blackhole, each applied until healed.
//
// Every impairment is made inside the namespace, on its end of the veth
// pair, so deleting the namespace (Close) removes whatever a crashed run
// left; names carry the creating process's id, and New removes the
// namespaces of processes that no longer run.
//
// How each is made:
//   - delay and reordering: tc netem on both ends of the link (its egress
//     in each direction) where the kernel has netem; otherwise a delayer
//     in this process (nfqueue.go) that takes every packet of the link
//     from an iptables NFQUEUE rule in the namespace (INPUT from the link,
//     OUTPUT to it), holds it and accepts it when its time comes;
//   - loss: netem's loss where the kernel has it; otherwise nftables on the
//     namespace's end of the link, ingress and egress (netdev hooks), a
//     "numgen random mod 100 < N drop" rule in each direction;
//   - blackhole: always nftables, every packet dropped at the namespace's
//     end of the link both ways, until the table is deleted.
//
// Drops are made at the link (netdev hooks, netem), not in the sockets'
// output path, so a sender sees a network that loses packets, not an
// EPERM from its own stack.
//
// Test and benchmark code only: the tollgate binary does not link it.
package netimpair

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrUnavailable wraps the reason a link cannot be built here (not root,
// no ip(8), no namespaces or veth): callers skip rather than fail.
var ErrUnavailable = errors.New("network namespace unavailable")

// Link is a namespace behind a veth pair: the host end (HostIf, HostIP) in
// the caller's namespace, the other end (NSIf, NSIP) in NS.
type Link struct {
	NS     string
	HostIf string
	NSIf   string
	HostIP string
	NSIP   string

	mu      sync.Mutex
	netem   int // 0 unknown, 1 available, -1 not
	closed  bool
	active  []*Impairment
	queueNo uint16
}

var linkSeq atomic.Uint32

// staleName matches the names New gives: tgi<pid>x<seq> (namespace) and
// tgi<pid>x<seq>h / n (veth ends).
var staleName = regexp.MustCompile(`^tgi(\d+)x[0-9a-f]{2}[hn]?$`)

// New builds a namespace joined to this one by a veth pair on a free /30
// of 10.204.0.0/14. An error wrapping ErrUnavailable means this machine or
// user cannot (not root, no ip, no veth).
func New() (*Link, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: needs root (CAP_NET_ADMIN) to create a network namespace and a veth pair", ErrUnavailable)
	}
	for _, tool := range []string{"ip", "nft", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%w: needs %s (make deps installs nftables and iproute2): %v", ErrUnavailable, tool, err)
		}
	}
	removeStale()
	id := fmt.Sprintf("%dx%02x", os.Getpid(), linkSeq.Add(1)&0xff)
	l := &Link{NS: "tgi" + id, HostIf: "tgi" + id + "h", NSIf: "tgi" + id + "n"}
	var err error
	if l.HostIP, l.NSIP, err = freeSubnet(); err != nil {
		return nil, err
	}
	if out, err := run("ip", "netns", "add", l.NS); err != nil {
		return nil, fmt.Errorf("%w: ip netns add: %v: %s", ErrUnavailable, err, out)
	}
	if out, err := run("ip", "link", "add", l.HostIf, "type", "veth", "peer", "name", l.NSIf); err != nil {
		l.Close()
		return nil, fmt.Errorf("%w: no veth pair (kernel or container without veth?): %v: %s", ErrUnavailable, err, out)
	}
	for _, s := range [][]string{
		{"link", "set", l.NSIf, "netns", l.NS},
		{"addr", "add", l.HostIP + "/30", "dev", l.HostIf},
		{"link", "set", l.HostIf, "up"},
		{"-n", l.NS, "addr", "add", l.NSIP + "/30", "dev", l.NSIf},
		{"-n", l.NS, "link", "set", l.NSIf, "up"},
		{"-n", l.NS, "link", "set", "lo", "up"},
	} {
		if out, err := run("ip", s...); err != nil {
			l.Close()
			return nil, fmt.Errorf("netimpair: ip %s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return l, nil
}

// Close heals what is still applied and deletes the veth pair and the
// namespace (with it every rule, qdisc and queue binding inside).
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	active := l.active
	l.active = nil
	l.mu.Unlock()
	var errs []error
	for _, a := range active {
		if _, err := a.heal(); err != nil {
			errs = append(errs, err)
		}
	}
	if out, err := run("ip", "link", "del", l.HostIf); err != nil && !strings.Contains(string(out), "Cannot find device") {
		errs = append(errs, fmt.Errorf("ip link del %s: %v: %s", l.HostIf, err, out))
	}
	if out, err := run("ip", "netns", "del", l.NS); err != nil {
		errs = append(errs, fmt.Errorf("ip netns del %s: %v: %s", l.NS, err, out))
	}
	return errors.Join(errs...)
}

// InNS runs f on an OS thread that has joined the namespace; sockets f
// creates belong to the namespace for their whole life, whichever thread
// uses them later. The thread returns to this process's namespace before
// it is given back to the scheduler.
//
// The thread must not be left to die (the usual way out of a namespace
// in Go: end the goroutine locked): a child started with Pdeathsig (the
// fault suite's tollgate processes) is signalled when the thread that
// forked it exits, and any of the scheduler's threads may have forked one.
func (l *Link) InNS(f func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- l.inNSHere(f) }()
	return <-errc
}

// inNSHere is InNS on the calling goroutine's thread.
func (l *Link) inNSHere(f func() error) error {
	runtime.LockOSThread()
	self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open this thread's namespace: %w", err)
	}
	defer unix.Close(self)
	fd, err := unix.Open("/var/run/netns/"+l.NS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open namespace %s: %w", l.NS, err)
	}
	err = unix.Setns(fd, unix.CLONE_NEWNET)
	unix.Close(fd)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", l.NS, err)
	}
	ferr := f()
	if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
		// Stays locked: the thread ends with its goroutine rather
		// than run other goroutines in the namespace.
		return errors.Join(ferr, fmt.Errorf("setns back: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// Listen listens in the namespace on NSIP at addr's port (kfake's
// ListenFn passes 127.0.0.1:0): reachable from the host only across the
// link.
func (l *Link) Listen(network, addr string) (net.Listener, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("netimpair listen %s: %w", addr, err)
	}
	var ln net.Listener
	err = l.InNS(func() error {
		var err error
		ln, err = net.Listen(network, net.JoinHostPort(l.NSIP, port))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netimpair listen in %s: %w", l.NS, err)
	}
	return ln, nil
}

// HasNetem reports whether the kernel has tc netem (probed once on the
// link) and TOLLGATE_NETIMPAIR is not "nfqueue" (which forces the
// fallback, to run it on a kernel that has netem).
func (l *Link) HasNetem() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.netem == 0 {
		l.netem = -1
		if os.Getenv("TOLLGATE_NETIMPAIR") != "nfqueue" {
			if _, err := run("ip", "netns", "exec", l.NS, "tc", "qdisc", "add", "dev", l.NSIf, "root", "netem", "delay", "0ms"); err == nil {
				run("ip", "netns", "exec", l.NS, "tc", "qdisc", "del", "dev", l.NSIf, "root")
				l.netem = 1
			}
		}
	}
	return l.netem == 1
}

// Impairment is one applied impairment; Heal removes it.
type Impairment struct {
	Method string // how it is made, e.g. "tc netem delay 50ms 10ms" or "nfqueue delayer ..."
	undo   func() (string, error)
	once   sync.Once
	stats  string
	err    error
}

func (a *Impairment) heal() (string, error) {
	a.once.Do(func() { a.stats, a.err = a.undo() })
	return a.stats, a.err
}

// Heal removes the impairment and returns what it did (packets dropped,
// delayed, reordered) where that was measured.
func (l *Link) Heal(a *Impairment) (string, error) {
	l.mu.Lock()
	for i, x := range l.active {
		if x == a {
			l.active = append(l.active[:i], l.active[i+1:]...)
			break
		}
	}
	l.mu.Unlock()
	return a.heal()
}

func (l *Link) add(a *Impairment) *Impairment {
	l.mu.Lock()
	l.active = append(l.active, a)
	l.mu.Unlock()
	return a
}

// netem applies netem args on both ends' egress (so both directions).
func (l *Link) netemBoth(args ...string) (*Impairment, error) {
	host := append([]string{"qdisc", "add", "dev", l.HostIf, "root", "netem"}, args...)
	if out, err := run("tc", host...); err != nil {
		return nil, fmt.Errorf("tc %s: %v: %s", strings.Join(host, " "), err, out)
	}
	ns := append([]string{"netns", "exec", l.NS, "tc", "qdisc", "add", "dev", l.NSIf, "root", "netem"}, args...)
	if out, err := run("ip", ns...); err != nil {
		run("tc", "qdisc", "del", "dev", l.HostIf, "root")
		return nil, fmt.Errorf("ip %s: %v: %s", strings.Join(ns, " "), err, out)
	}
	return l.add(&Impairment{
		Method: "tc netem " + strings.Join(args, " ") + " (each direction)",
		undo: func() (string, error) {
			stats := l.netemStats()
			_, err1 := run("tc", "qdisc", "del", "dev", l.HostIf, "root")
			out, err2 := run("ip", "netns", "exec", l.NS, "tc", "qdisc", "del", "dev", l.NSIf, "root")
			if err2 != nil {
				err2 = fmt.Errorf("tc qdisc del in %s: %v: %s", l.NS, err2, out)
			}
			return stats, errors.Join(err1, err2)
		},
	}), nil
}

var netemSent = regexp.MustCompile(`Sent \d+ bytes (\d+) pkt \(dropped (\d+)`)

// netemStats sums the two qdiscs' sent and dropped packets.
func (l *Link) netemStats() string {
	var sent, dropped int64
	for _, args := range [][]string{
		{"tc", "-s", "qdisc", "show", "dev", l.HostIf},
		{"ip", "netns", "exec", l.NS, "tc", "-s", "qdisc", "show", "dev", l.NSIf},
	} {
		out, _ := run(args[0], args[1:]...)
		if m := netemSent.FindStringSubmatch(string(out)); m != nil {
			s, _ := strconv.ParseInt(m[1], 10, 64)
			d, _ := strconv.ParseInt(m[2], 10, 64)
			sent, dropped = sent+s, dropped+d
		}
	}
	return fmt.Sprintf("%d packets sent, %d dropped", sent, dropped)
}

// Delay holds every packet of the link, each direction, for d ± jitter
// (uniform). Packets released in time order, so a jitter wider than the
// gap between two packets reorders them (netem does the same).
func (l *Link) Delay(d, jitter time.Duration) (*Impairment, error) {
	if l.HasNetem() {
		return l.netemBoth("delay", ms(d), ms(jitter))
	}
	return l.delayer(delayerConfig{delay: d, jitter: jitter})
}

// Reorder sends pct% of the packets at once and holds the others for d,
// each direction: netem's "delay D reorder P%" (without its correlation).
func (l *Link) Reorder(d time.Duration, pct int) (*Impairment, error) {
	if l.HasNetem() {
		return l.netemBoth("delay", ms(d), "reorder", strconv.Itoa(pct)+"%")
	}
	return l.delayer(delayerConfig{delay: d, immediatePct: pct})
}

// Loss drops pct% of the packets at random, each direction.
func (l *Link) Loss(pct int) (*Impairment, error) {
	if l.HasNetem() {
		return l.netemBoth("loss", strconv.Itoa(pct)+"%")
	}
	return l.nftDrop(fmt.Sprintf("numgen random mod 100 < %d", pct), fmt.Sprintf("nftables: numgen random mod 100 < %d drop at the link, ingress and egress", pct))
}

// Blackhole drops every packet of the link, both ways, until healed.
func (l *Link) Blackhole() (*Impairment, error) {
	return l.nftDrop("", "nftables: every packet dropped at the link, ingress and egress")
}

const nftTable = "tollgate_netimpair"

// nftDrop loads a netdev table on the namespace's end of the link that
// drops, ingress and egress, the packets cond matches (all when empty),
// counting them.
func (l *Link) nftDrop(cond, method string) (*Impairment, error) {
	rules := fmt.Sprintf(`table netdev %[1]s {
	chain in {
		type filter hook ingress device %[2]q priority 0;
		%[3]s counter drop
	}
	chain out {
		type filter hook egress device %[2]q priority 0;
		%[3]s counter drop
	}
}
`, nftTable, l.NSIf, cond)
	cmd := exec.Command("ip", "netns", "exec", l.NS, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("nft in %s: %v: %s\n%s", l.NS, err, out, rules)
	}
	return l.add(&Impairment{
		Method: method,
		undo: func() (string, error) {
			out, _ := run("ip", "netns", "exec", l.NS, "nft", "list", "table", "netdev", nftTable)
			var n int64
			for _, m := range nftPackets.FindAllStringSubmatch(string(out), -1) {
				v, _ := strconv.ParseInt(m[1], 10, 64)
				n += v
			}
			if out, err := run("ip", "netns", "exec", l.NS, "nft", "delete", "table", "netdev", nftTable); err != nil {
				return "", fmt.Errorf("nft delete table in %s: %v: %s", l.NS, err, out)
			}
			return fmt.Sprintf("%d packets dropped", n), nil
		},
	}), nil
}

var nftPackets = regexp.MustCompile(`counter packets (\d+)`)

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }

// run runs a command with a bound on its time.
func run(name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, name, args...).CombinedOutput()
}

// removeStale deletes namespaces and veth ends of processes that no
// longer run (killed before Close).
func removeStale() {
	stale := func(name string) bool {
		m := staleName.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, err := strconv.Atoi(m[1])
		return err == nil && pid != os.Getpid() && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}
	links, _ := run("ip", "-o", "link", "show")
	for _, line := range strings.Split(string(links), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if stale(name) {
			run("ip", "link", "del", name)
		}
	}
	spaces, _ := run("ip", "netns", "list")
	for _, line := range strings.Split(string(spaces), "\n") {
		if f := strings.Fields(line); len(f) > 0 && stale(f[0]) {
			run("ip", "netns", "del", f[0])
		}
	}
}

// freeSubnet picks a /30 in 10.204.0.0/14 that no interface is on (the
// gateway's namespace tests take 10.200.0.0/14).
func freeSubnet() (host, ns string, err error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", "", fmt.Errorf("netimpair: interface addresses: %w", err)
	}
	for range 100 {
		base := net.IPv4(10, byte(204+rand.IntN(4)), byte(rand.IntN(256)), byte(rand.IntN(64)*4)).To4()
		subnet := &net.IPNet{IP: base, Mask: net.CIDRMask(30, 32)}
		taken := false
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && (ipn.Contains(base) || subnet.Contains(ipn.IP)) {
				taken = true
			}
		}
		if !taken {
			return net.IPv4(base[0], base[1], base[2], base[3]+1).String(), net.IPv4(base[0], base[1], base[2], base[3]+2).String(), nil
		}
	}
	return "", "", errors.New("netimpair: no free /30 in 10.204.0.0/14")
}

// Diagnose returns the link's state for a failure report: both ends'
// counters, the namespace's sockets, firewall rules and queues.
func (l *Link) Diagnose() string {
	var b strings.Builder
	for _, args := range [][]string{
		{"ip", "-s", "link", "show", l.HostIf},
		{"ip", "-n", l.NS, "-s", "link", "show", l.NSIf},
		{"ip", "netns", "exec", l.NS, "ss", "-tni"},
		{"ip", "netns", "exec", l.NS, "nft", "list", "ruleset"},
		{"ip", "netns", "exec", l.NS, "cat", "/proc/net/netfilter/nfnetlink_queue"},
		{"tc", "-s", "qdisc", "show", "dev", l.HostIf},
	} {
		out, err := run(args[0], args[1:]...)
		fmt.Fprintf(&b, "$ %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	return b.String()
}
