//go:build linux

package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A network namespace for the single-port test: it is joined to the host
// by one veth pair on its own /30 and routes everything else through the
// host too (a default route), so without a firewall it reaches every
// host address; its nftables firewall then lets out only TCP to the
// gateway's one port (and the replies). Names carry the creating
// process's id, so a crashed run's leftovers are recognised and removed.
//
// Ownership: the test that calls newNetns; t.Cleanup deletes the veth
// pair and the namespace, whatever the test's outcome.
type netns struct {
	name   string // the namespace (ip netns)
	hostIf string // the host end of the veth pair
	hostIP string // on hostIf: the gateway and the upstream listen here
	nsIP   string // on the namespace end
}

// netnsSeq tells apart the namespaces one test process creates
// (-count=N runs the test N times in one process).
var netnsSeq atomic.Uint32

// staleNetnsName matches the namespace and interface names newNetns
// gives: tgns<pid>x<seq>, tgv<pid>x<seq>h and tgv<pid>x<seq>n.
var staleNetnsName = regexp.MustCompile(`^tg(?:ns|v)(\d+)x[0-9a-f]{2}[hn]?$`)

const netnsTable = "tollgate_test" // the nftables table inside the namespace

// newNetns creates the namespace and its veth pair, or skips the test
// when this process may not (not root, no CAP_NET_ADMIN, no ip or nft).
func newNetns(t *testing.T) *netns {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace: run as root (CI does) to test single-port from a namespace that reaches only the gateway's port")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s to build the network namespace and its firewall (make deps installs nftables): %v", tool, err)
		}
	}
	removeStaleNetns(t)
	id := fmt.Sprintf("%dx%02x", os.Getpid(), netnsSeq.Add(1)&0xff)
	n := &netns{name: "tgns" + id, hostIf: "tgv" + id + "h"}
	nsIf := "tgv" + id + "n"
	n.hostIP, n.nsIP = freeSubnet(t)
	if out, err := ipCmd("netns", "add", n.name); err != nil {
		t.Skipf("needs root with CAP_NET_ADMIN to create a network namespace: ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { n.remove(t) })
	if out, err := ipCmd("link", "add", n.hostIf, "type", "veth", "peer", "name", nsIf); err != nil {
		t.Skipf("cannot create a veth pair (no veth support in this kernel or container?): %v: %s", err, out)
	}
	steps := [][]string{
		{"link", "set", nsIf, "netns", n.name},
		{"addr", "add", n.hostIP + "/30", "dev", n.hostIf},
		{"link", "set", n.hostIf, "up"},
		{"-n", n.name, "addr", "add", n.nsIP + "/30", "dev", nsIf},
		{"-n", n.name, "link", "set", nsIf, "up"},
		{"-n", n.name, "link", "set", "lo", "up"},
		// Everything else goes to the host too: the firewall, not a
		// missing route, is what keeps the namespace to one port.
		{"-n", n.name, "route", "add", "default", "via", n.hostIP},
	}
	for _, s := range steps {
		if out, err := ipCmd(s...); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return n
}

// ipCmd runs ip(8) with a bound on its time.
func ipCmd(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, "ip", args...).CombinedOutput()
}

// remove deletes the veth pair (both ends go with the host end) and then
// the namespace; either may be gone already.
func (n *netns) remove(t *testing.T) {
	if out, err := ipCmd("link", "del", n.hostIf); err != nil && !bytes.Contains(out, []byte("Cannot find device")) {
		t.Errorf("ip link del %s: %v: %s", n.hostIf, err, out)
	}
	if out, err := ipCmd("netns", "del", n.name); err != nil {
		t.Errorf("ip netns del %s: %v: %s", n.name, err, out)
	}
}

// removeStaleNetns deletes namespaces and veth ends left by a test
// process that no longer runs (one killed before its cleanup ran).
func removeStaleNetns(t *testing.T) {
	t.Helper()
	stale := func(name string) bool {
		m := staleNetnsName.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, err := strconv.Atoi(m[1])
		return err == nil && pid != os.Getpid() && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}
	links, _ := ipCmd("-o", "link", "show")
	for _, line := range strings.Split(string(links), "\n") {
		// "12: tgv123x01h@if11: <BROADCAST,..."
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if stale(name) {
			t.Logf("removing stale veth %s", name)
			ipCmd("link", "del", name)
		}
	}
	spaces, _ := ipCmd("netns", "list")
	for _, line := range strings.Split(string(spaces), "\n") {
		// "tgns123x01 (id: 3)"
		if f := strings.Fields(line); len(f) > 0 && stale(f[0]) {
			t.Logf("removing stale network namespace %s", f[0])
			ipCmd("netns", "del", f[0])
		}
	}
}

// freeSubnet picks a /30 in 10.200.0.0/14 that no host interface is on.
func freeSubnet(t *testing.T) (host, ns string) {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		base := net.IPv4(10, byte(200+rand.IntN(4)), byte(rand.IntN(256)), byte(rand.IntN(64)*4)).To4()
		subnet := &net.IPNet{IP: base, Mask: net.CIDRMask(30, 32)}
		taken := false
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && (ipn.Contains(base) || subnet.Contains(ipn.IP)) {
				taken = true
			}
		}
		if !taken {
			return net.IPv4(base[0], base[1], base[2], base[3]+1).String(), net.IPv4(base[0], base[1], base[2], base[3]+2).String()
		}
	}
	t.Fatal("no free /30 in 10.200.0.0/14 for the test's veth pair")
	return "", ""
}

// lockDown loads the namespace's firewall: out, only loopback, replies
// and new TCP connections to allow (the gateway's single-port listener);
// in, only loopback and replies. Other outgoing TCP is refused with a
// reset and counted in the named counter "refused" (a reset, not a drop,
// so that a blocked dial fails at once rather than after its timeout: a
// dropped SYN is only retransmitted); everything else is dropped and
// counted in "dropped".
func (n *netns) lockDown(t *testing.T, allow string) {
	t.Helper()
	host, port, err := net.SplitHostPort(allow)
	if err != nil {
		t.Fatal(err)
	}
	rules := fmt.Sprintf(`
table inet %[1]s {
	counter refused { }
	counter dropped { }
	chain output {
		type filter hook output priority 0; policy drop;
		oif "lo" accept
		ct state established,related accept
		ip daddr %[2]s tcp dport %[3]s ct state new accept
		meta l4proto tcp counter name "refused" reject with tcp reset
		counter name "dropped" drop
	}
	chain input {
		type filter hook input priority 0; policy drop;
		iif "lo" accept
		ct state established,related accept
		counter name "dropped" drop
	}
}
`, netnsTable, host, port)
	if out, err := n.nft("", "add", "table", "inet", netnsTable); err != nil {
		t.Skipf("cannot create an nftables table in the namespace (no nf_tables in this kernel?): %v: %s", err, out)
	}
	if out, err := n.nft(rules, "-f", "-"); err != nil {
		t.Fatalf("load the namespace's firewall: %v: %s\n%s", err, out, rules)
	}
}

// allowAlso opens one more ip:port for new outgoing TCP connections.
func (n *netns) allowAlso(t *testing.T, addr string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	if out, err := n.nft("", "insert", "rule", "inet", netnsTable, "output", "ip", "daddr", host, "tcp", "dport", port, "ct", "state", "new", "accept"); err != nil {
		t.Fatalf("nft insert rule: %v: %s", err, out)
	}
}

// refused reads how many outgoing TCP connections the firewall refused.
func (n *netns) refused(t *testing.T) int {
	t.Helper()
	out, err := n.nft("", "list", "counter", "inet", netnsTable, "refused")
	if err != nil {
		t.Fatalf("nft list counter: %v: %s", err, out)
	}
	m := regexp.MustCompile(`packets (\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("nft list counter: no packet count in %s", out)
	}
	v, _ := strconv.Atoi(string(m[1]))
	return v
}

func (n *netns) nft(stdin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.name, "nft"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	return cmd.CombinedOutput()
}

// exec runs a program inside the namespace and returns its standard
// output; a failure fails the test with both outputs.
func (n *netns) exec(t *testing.T, stdin string, prog string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.name, prog}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("in namespace %s: %s %s: %v\nstdout:\n%s\nstderr:\n%s", n.name, prog, strings.Join(args, " "), err, out.String(), errb.String())
	}
	if errb.Len() > 0 {
		t.Logf("in namespace %s: %s wrote on stderr:\n%s", n.name, prog, errb.String())
	}
	return out.String()
}

// Talking to the helper process: TestNetnsHelper, re-executed from this
// test binary inside the namespace, reads its task from the environment,
// may ask the test questions (one line each, answered on its stdin) and
// prints one result line.
const (
	netnsHelperEnv  = "TOLLGATE_NETNS_HELPER"  // the task: a case of TestNetnsHelper's switch
	netnsRequestEnv = "TOLLGATE_NETNS_REQUEST" // the task's JSON request
	netnsResultTag  = "netns-result: "         // prefix of the JSON result line on stdout
	netnsAskTag     = "netns-ask: "            // prefix of a question to the test, answered on stdin
)

// helper runs task in the namespace and decodes its result into res.
func (n *netns) helper(t *testing.T, task string, req, res any) {
	t.Helper()
	n.helperTalk(t, task, req, res, nil)
}

// helperTalk runs task in the namespace; each line the helper prints
// with netnsAskTag is passed to answer, whose reply (or error) goes back
// on the helper's standard input; the result line is decoded into res.
func (n *netns) helperTalk(t *testing.T, task string, req, res any, answer func(ask string) (string, error)) {
	t.Helper()
	raw, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", n.name, os.Args[0], "-test.run=^TestNetnsHelper$", "-test.count=1", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), netnsHelperEnv+"="+task, netnsRequestEnv+"="+string(raw),
		// A race-enabled binary sleeps a second at exit by default.
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper %s: %v", task, err)
	}
	var out strings.Builder
	var result []byte
	var talkErr error
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 4<<20)
	for lines.Scan() {
		line := lines.Text()
		out.WriteString(line + "\n")
		if rest, ok := strings.CutPrefix(line, netnsResultTag); ok {
			result = []byte(rest)
		} else if ask, ok := strings.CutPrefix(line, netnsAskTag); ok && talkErr == nil {
			reply := ""
			if answer == nil {
				talkErr = fmt.Errorf("the helper asked %q and nobody answers", ask)
			} else {
				reply, talkErr = answer(ask)
			}
			if talkErr != nil {
				cancel() // ends the helper, and so this loop
			} else if _, err := io.WriteString(stdin, reply+"\n"); err != nil {
				talkErr = fmt.Errorf("answer %q: %w", ask, err)
			}
		}
	}
	err = cmd.Wait()
	if errb.Len() > 0 {
		t.Logf("helper %s wrote on stderr:\n%s", task, errb.String())
	}
	switch {
	case talkErr != nil:
		t.Fatalf("helper %s: %v\nstdout:\n%s", task, talkErr, out.String())
	case err != nil:
		t.Fatalf("helper %s in namespace %s: %v\nstdout:\n%s", task, n.name, err, out.String())
	case result == nil:
		t.Fatalf("helper %s printed no result line:\n%s", task, out.String())
	}
	if err := json.Unmarshal(result, res); err != nil {
		t.Fatalf("helper %s: bad result %q: %v", task, result, err)
	}
}

// nsNodeCounter counts, per key, the kfake nodes that served requests.
type nsNodeCounter struct {
	mu   sync.Mutex
	seen map[int16]map[int32]int
}

func countUpstreamNodes(c *kfake.Cluster, keys ...kmsg.Key) *nsNodeCounter {
	nc := &nsNodeCounter{seen: map[int16]map[int32]int{}}
	for _, k := range keys {
		nc.seen[int16(k)] = map[int32]int{}
		c.ControlKey(int16(k), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			nc.mu.Lock()
			defer nc.mu.Unlock()
			nc.seen[req.Key()][c.CurrentNode()]++
			return nil, nil, false
		})
	}
	return nc
}

func (nc *nsNodeCounter) nodes(k kmsg.Key) map[int32]int {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	m := map[int32]int{}
	for node, n := range nc.seen[int16(k)] {
		m[node] = n
	}
	return m
}
