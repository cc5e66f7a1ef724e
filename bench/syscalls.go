package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// syscallEvents are the tracepoints a run with Options.Syscalls counts in
// the middle process: every system call, and the ones a relay or a gateway
// makes per request or per byte.
var syscallEvents = []string{
	"raw_syscalls:sys_enter",
	"syscalls:sys_enter_read", "syscalls:sys_enter_write", "syscalls:sys_enter_writev",
	"syscalls:sys_enter_readv", "syscalls:sys_enter_splice", "syscalls:sys_enter_epoll_pwait",
	"syscalls:sys_enter_futex", "syscalls:sys_enter_nanosleep", "syscalls:sys_enter_setsockopt",
	"syscalls:sys_enter_getsockopt", "syscalls:sys_enter_sched_yield", "syscalls:sys_enter_tgkill",
	"syscalls:sys_enter_rt_sigreturn", "syscalls:sys_enter_madvise", "syscalls:sys_enter_mmap",
	"syscalls:sys_enter_pipe2", "syscalls:sys_enter_close", "syscalls:sys_enter_sendmsg",
	// Not system calls: packets the process put on a device (loopback
	// here: each one is also a receive, and often a wake-up, of the peer)
	// and data-ready wake-ups it caused on receiving sockets.
	"net:net_dev_xmit", "sock:sk_data_ready",
}

// availableEvents drops the tracepoints this kernel does not have (perf
// stat refuses the whole list for one unknown event: sock:sk_data_ready
// is recent), where tracefs shows which it has; elsewhere it keeps all.
func availableEvents(events []string) []string {
	var root string
	for _, r := range []string{"/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"} {
		if _, err := os.Stat(r); err == nil {
			root = r
			break
		}
	}
	if root == "" {
		return events
	}
	var out []string
	for _, e := range events {
		sys, name, _ := strings.Cut(e, ":")
		if sys == "raw_syscalls" || sys == "syscalls" {
			out = append(out, e) // the system calls themselves: as before
			continue
		}
		if _, err := os.Stat(root + "/" + sys + "/" + name); err == nil {
			out = append(out, e)
		}
	}
	return out
}

// syscallCounter is `perf stat` attached to a child for one window.
type syscallCounter struct {
	cmd  *exec.Cmd
	out  string
	done chan error
}

// startSyscalls attaches perf stat to pid; stop returns the counts by
// short name ("all", "read", "splice", ...).
func startSyscalls(pid int) (*syscallCounter, error) {
	f, err := os.CreateTemp("", "tollgate-bench-perf-*.csv")
	if err != nil {
		return nil, fmt.Errorf("syscalls: %w", err)
	}
	f.Close()
	cmd := exec.Command("perf", "stat", "-x", ",", "-o", f.Name(), "-e", strings.Join(availableEvents(syscallEvents), ","), "-p", strconv.Itoa(pid))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		os.Remove(f.Name())
		return nil, fmt.Errorf("syscalls: start perf: %w", err)
	}
	c := &syscallCounter{cmd: cmd, out: f.Name(), done: make(chan error, 1)}
	go func() {
		err := cmd.Wait()
		if err != nil && stderr.Len() > 0 {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(stderr.Bytes()))
		}
		c.done <- err
	}()
	// perf opens its counters after it starts; give it a moment so the
	// window's first calls are counted (the window is seconds long).
	time.Sleep(100 * time.Millisecond)
	return c, nil
}

func (c *syscallCounter) stop() (map[string]int64, error) {
	defer os.Remove(c.out)
	c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
		return nil, fmt.Errorf("syscalls: perf did not stop")
	}
	data, err := os.ReadFile(c.out)
	if err != nil {
		return nil, fmt.Errorf("syscalls: %w", err)
	}
	return parsePerfStat(data)
}

// parsePerfStat reads `perf stat -x ,` output: count,unit,event,...
func parsePerfStat(data []byte) (map[string]int64, error) {
	counts := make(map[string]int64)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ",")
		if len(fields) < 3 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue // "<not counted>"
		}
		name := fields[2]
		switch {
		case name == "raw_syscalls:sys_enter":
			name = "all"
		case strings.HasPrefix(name, "syscalls:sys_enter_"):
			name = strings.TrimPrefix(name, "syscalls:sys_enter_")
		case name == "net:net_dev_xmit":
			name = "xmit"
		case name == "sock:sk_data_ready":
			name = "data_ready"
		}
		counts[name] = n
	}
	if len(counts) == 0 {
		return nil, fmt.Errorf("syscalls: perf counted nothing: %q", data)
	}
	return counts, nil
}

// syscallsBrief is the per-MB counts of r, largest first.
func syscallsBrief(r RunResult) string {
	if len(r.Syscalls) == 0 || r.WireBytes == 0 {
		return ""
	}
	mb := float64(r.WireBytes) / 1e6
	type kv struct {
		k string
		v int64
	}
	var kvs []kv
	for k, v := range r.Syscalls {
		if v > 0 {
			kvs = append(kvs, kv{k, v})
		}
	}
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].v > kvs[j].v })
	var b strings.Builder
	b.WriteString("  syscalls/MB")
	for _, e := range kvs {
		fmt.Fprintf(&b, " %s=%.1f", e.k, float64(e.v)/mb)
	}
	if r.Requests > 0 {
		fmt.Fprintf(&b, " | per request: %.1f KB", float64(r.WireBytes)/1e3/float64(r.Requests))
		for _, e := range kvs {
			if float64(e.v)/float64(r.Requests) >= 0.05 {
				fmt.Fprintf(&b, " %s=%.2f", e.k, float64(e.v)/float64(r.Requests))
			}
		}
	}
	return b.String()
}
