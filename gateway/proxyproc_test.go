package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test proxies (tinyproxy, danted) take a port number in their
// configuration, not a listener, so the port is chosen free (freePort)
// and bound by the proxy later; another process on the machine can take
// it in between. startOnFreePort closes that gap: the proxy counts as
// started only once the listening socket on its port is the proxy's own
// (found through /proc), and a proxy that exits first (its bind failed)
// is started again on a fresh port.

// proxyStartAttempts bounds the retries; each needs another process to
// take the port in a window of milliseconds.
const proxyStartAttempts = 5

// startOnFreePort starts the command configure returns for a free port,
// writing its output to out, and returns the port it listens on. The
// process is stopped (SIGTERM by its pid, then SIGKILL) when the test
// ends.
func startOnFreePort(t *testing.T, out *syncBuffer, configure func(port int) (name string, args []string)) int {
	t.Helper()
	return startOnPorts(t, out, freePort, configure)
}

// startOnPorts is startOnFreePort taking each attempt's port from next.
func startOnPorts(t *testing.T, out *syncBuffer, next func(*testing.T) int, configure func(port int) (name string, args []string)) int {
	t.Helper()
	var last string
	for range proxyStartAttempts {
		port := next(t)
		name, args := configure(port)
		switch exited, err := startListening(t, port, out, name, args); {
		case err != nil:
			t.Fatalf("%s: %v\n%s", name, err, out.String())
		case !exited:
			return port
		}
		last = fmt.Sprintf("%s exited before listening on port %d:\n%s", name, port, out.String())
		t.Logf("%s; retrying on another port", last)
	}
	t.Fatalf("%d attempts failed; the last: %s", proxyStartAttempts, last)
	return 0
}

// startListening starts one attempt and waits until the process listens
// on 127.0.0.1:port (exited false) or exits (exited true).
func startListening(t *testing.T, port int, out *syncBuffer, name string, args []string) (exited bool, err error) {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed (make deps installs it)", name)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group: dante forks children that inherit the output
	// pipe, and cmd.Wait waits for the pipe as well as for the process.
	// Stopping signals the whole group (only processes this test started),
	// and WaitDelay bounds the wait for the pipe.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return false, err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { stopProcess(t, name, cmd.Process.Pid, done) })
	deadline := time.Now().Add(15 * time.Second)
	for {
		owned, err := listensOn(cmd.Process.Pid, port)
		if err != nil {
			return false, err
		}
		if owned {
			return false, nil
		}
		select {
		case <-done:
			return true, nil
		default:
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("not listening on 127.0.0.1:%d after 15s", port)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// stopProcess ends the process group pgid (SIGTERM, then SIGKILL after
// 10 s) and waits, bounded, for done.
func stopProcess(t *testing.T, name string, pgid int, done <-chan struct{}) {
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-done:
		return
	case <-time.After(10 * time.Second):
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Errorf("%s (process group %d) did not exit 30s after SIGKILL", name, pgid)
	}
}

// listensOn reports whether process pid holds the socket listening on
// 127.0.0.1:port: the socket's inode from /proc/net/tcp among the
// process's open files.
func listensOn(pid, port int) (bool, error) {
	inode, err := listeningInode(port)
	if err != nil || inode == "" {
		return false, err
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false, nil // the process is gone (or going): its exit is seen next
	}
	want := "socket:[" + inode + "]"
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name())); err == nil && l == want {
			return true, nil
		}
	}
	return false, nil
}

// listeningInode is the inode of the socket in state LISTEN on
// 127.0.0.1:port, or "" if there is none. /proc/net/tcp rows are
// "sl local_address rem_address st ... inode", addresses as hex
// "0100007F:PORT" (the address in host byte order), LISTEN is 0A.
func listeningInode(port int) (string, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return "", fmt.Errorf("find the proxy's listening socket: %w", err)
	}
	defer f.Close()
	local := fmt.Sprintf("0100007F:%04X", port)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 10 && fields[1] == local && fields[3] == "0A" {
			return fields[9], nil
		}
	}
	return "", sc.Err()
}

// TestStartOnFreePortRetries: the first port offered is already taken
// (by this test's own listener, as another process would take it):
// tinyproxy's bind fails, the listener there is not tinyproxy's, so it is
// started again on the next port, and serves there.
func TestStartOnFreePortRetries(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	ports := []int{taken.Addr().(*net.TCPAddr).Port}
	next := func(t *testing.T) int {
		if len(ports) > 0 {
			p := ports[0]
			ports = ports[1:]
			return p
		}
		return freePort(t)
	}
	dir := t.TempDir()
	out := &syncBuffer{}
	var tried []int
	port := startOnPorts(t, out, next, func(port int) (string, []string) {
		tried = append(tried, port)
		file := filepath.Join(dir, "tinyproxy.conf")
		conf := fmt.Sprintf("Port %d\nListen 127.0.0.1\nLogLevel Info\nAllow 127.0.0.1\n", port)
		if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		return "tinyproxy", []string{"-d", "-c", file}
	})
	if len(tried) != 2 || tried[0] != taken.Addr().(*net.TCPAddr).Port || port != tried[1] {
		t.Fatalf("ports tried %v, started on %d: want the taken port, then a fresh one", tried, port)
	}
	// What answers on the port is tinyproxy (an HTTP proxy), not the
	// taken listener.
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.") {
		t.Errorf("the proxy answered %q, %v; want an HTTP status line", line, err)
	}
}

// TestProxyStopEndsForkedChildren: dante serves each tunnel in a forked
// io-child that outlives its mother process and keeps the mother's output
// pipe open, so waiting for the mother alone (cmd.Wait) would wait for
// the tunnel. Here the tunnel stays open through the proxy's cleanup (its
// connection is closed by a cleanup that runs after it): stopping the
// proxy must end the io-child too, within stopProcess's bounds.
func TestProxyStopEndsForkedChildren(t *testing.T) {
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Close() })
	var tunnel net.Conn
	t.Cleanup(func() {
		if tunnel != nil {
			tunnel.Close()
		}
	})
	var pgid int
	t.Run("proxy", func(t *testing.T) {
		p := startDanted(t, "", "")
		u, err := url.Parse(p.url)
		if err != nil {
			t.Fatal(err)
		}
		if tunnel, err = net.DialTimeout("tcp", u.Host, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		tunnel.SetDeadline(time.Now().Add(10 * time.Second))
		// SOCKS5 (RFC 1928): no authentication, then CONNECT to target.
		a := target.Addr().(*net.TCPAddr)
		req := append([]byte{5, 1, 0, 5, 1, 0, 1}, a.IP.To4()...)
		req = append(req, byte(a.Port>>8), byte(a.Port))
		if _, err := tunnel.Write(req); err != nil {
			t.Fatal(err)
		}
		reply := make([]byte, 2+10)
		if _, err := io.ReadFull(tunnel, reply); err != nil || reply[1] != 0 || reply[3] != 0 {
			t.Fatalf("SOCKS reply %v, %v", reply, err)
		}
		pgid = danteGroup(t, u.Port())
		if n := groupSize(pgid); n < 2 {
			t.Fatalf("dante's process group has %d processes; the test needs its io-child", n)
		}
	})
	// The subtest's cleanup stopped the proxy while the tunnel was open.
	if n := groupSize(pgid); n != 0 {
		t.Fatalf("%d processes of dante's group %d are still running after its cleanup", n, pgid)
	}
}

// danteGroup is the process group of the process listening on port.
func danteGroup(t *testing.T, port string) int {
	t.Helper()
	p, _ := strconv.Atoi(port)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ok, _ := listensOn(pid, p); ok {
			g, err := syscall.Getpgid(pid)
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
	}
	t.Fatalf("no process listens on port %s", port)
	return 0
}

// groupSize counts the live processes of group pgid (zombies excluded).
func groupSize(pgid int) int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(stat), ')')
		f := strings.Fields(string(stat[i+1:]))
		// f[0] is the state, f[2] the process group.
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			n++
		}
	}
	return n
}
