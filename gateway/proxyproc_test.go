package gateway

import (
	"bufio"
	"fmt"
	"net"
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
