package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The TLS suite's reference (issue 22): a protocol-blind TLS-terminating
// relay built from Debian's haproxy (package haproxy, mode tcp, "bind ...
// ssl crt"), one TLS port per upstream broker in front of the same kfake,
// with the suite's certificate. Like the gateway suite's splice relay it
// knows nothing of Kafka: the benchmark's dialer maps each broker address
// kfake advertises to its haproxy port. It runs as its own process, so
// its CPU is read from /proc as the gateways' is. haproxy's defaults are
// kept (its thread count is the CPU count; 16 KiB buffers) except that its
// TLS 1.3 suites are ordered as Go's are, so both negotiate
// TLS_AES_128_GCM_SHA256; the probe records what was negotiated. Without a
// haproxy on $PATH the variant is left out and the report says so.

// tlsHAProxy is the reference variant's name.
const tlsHAProxy = "haproxy-tls"

// haproxyBin is the program the reference runs.
const haproxyBin = "haproxy"

// haproxyVariant returns the reference variant, or a reason it is skipped.
func haproxyVariant() (variant, string) {
	path, err := exec.LookPath(haproxyBin)
	if err != nil {
		return variant{}, fmt.Sprintf("%s variant skipped: %s not found on $PATH (apt-get install haproxy)", tlsHAProxy, haproxyBin)
	}
	v := variant{name: tlsHAProxy, versus: tlsPlain, relay: path,
		desc: "haproxy (" + haproxyVersion(path) + ") mode tcp, bind ssl crt: a TLS-terminating relay in front of kfake, a port per broker"}
	return v, ""
}

// haproxyVersion is the first line of `haproxy -v`, shortened.
func haproxyVersion(path string) string {
	out, err := exec.Command(path, "-v").Output()
	if err != nil {
		return "version unknown"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	f := strings.Fields(line)
	if len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return strings.TrimSpace(line)
}

// startHAProxy writes the reference's certificate bundle and
// configuration into vdir, starts haproxy in the foreground and waits
// until every port accepts.
func (b *bencher) startHAProxy(v variant, vdir string) (*variantEnv, error) {
	cert, err := os.ReadFile(v.tls.Cert)
	if err != nil {
		return nil, fmt.Errorf("haproxy certificate: %w", err)
	}
	key, err := os.ReadFile(v.tls.Key)
	if err != nil {
		return nil, fmt.Errorf("haproxy key: %w", err)
	}
	bundle := filepath.Join(vdir, "haproxy.pem")
	if err := os.WriteFile(bundle, append(cert, key...), 0o600); err != nil {
		return nil, fmt.Errorf("write haproxy bundle: %w", err)
	}
	routes := make(map[string]string, len(b.upstreams))
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "# written by tollgate-bench: variant %s\n", v.name)
	cfg.WriteString("global\n  maxconn 4096\n  ssl-default-bind-options ssl-min-ver TLSv1.2\n" +
		"  ssl-default-bind-ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256\n" +
		"defaults\n  mode tcp\n  timeout connect 10s\n  timeout client 2m\n  timeout server 2m\n")
	for i, up := range b.upstreams {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		routes[up] = port
		fmt.Fprintf(&cfg, "frontend f%d\n  bind %s ssl crt %s\n  default_backend b%d\n", i, port, bundle, i)
		fmt.Fprintf(&cfg, "backend b%d\n  server s%d %s\n", i, i, up)
	}
	file := filepath.Join(vdir, "haproxy.cfg")
	if err := os.WriteFile(file, []byte(cfg.String()), 0o644); err != nil {
		return nil, fmt.Errorf("write haproxy config: %w", err)
	}
	cmd := exec.Command(v.relay, "-db", "-f", file)
	cmd.Stderr = b.opts.ChildStderr
	dieWithParent(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("haproxy stdin: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start haproxy: %w", err)
	}
	c := &child{cmd: cmd, stdin: stdin, done: make(chan error, 1), signal: syscall.SIGTERM,
		info: childInfo{Role: Path(haproxyBin), PID: cmd.Process.Pid, Routes: routes}}
	go func() { c.done <- cmd.Wait() }()
	for _, port := range routes {
		if err := waitListening(port, c.done, 15*time.Second); err != nil {
			c.stop()
			return nil, fmt.Errorf("haproxy %s: %w", file, err)
		}
	}
	ve := &variantEnv{v: v, info: VariantInfo{Name: v.name, Desc: v.desc, ConfigFile: file, Metrics: false}}
	ve.env = &pathEnv{path: Gateway, variant: v.name, tls: v.clientTLS, child: c, seeds: b.upstreams,
		route: func(a string) (string, error) {
			if r, ok := routes[a]; ok {
				return r, nil
			}
			return "", fmt.Errorf("%w: haproxy client dialing %s, which haproxy does not serve", errOffRoute, a)
		}}
	return ve, nil
}

// freePort returns a 127.0.0.1 port the kernel just handed out (and that
// is free again): haproxy cannot report a port it chose itself.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("pick a port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

// waitListening polls addr until it accepts a connection, the process
// exits (done delivers) or timeout passes.
func waitListening(addr string, done chan error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case werr := <-done:
			done <- werr // stop reads it again
			return fmt.Errorf("exited before listening on %s: %v (its stderr says why)", addr, werr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s after %v: %w", addr, timeout, err)
		}
	}
}

// checkHAProxy probes the reference's first port: a plaintext ApiVersions
// is refused, one after a verified handshake answered (by kfake, through
// haproxy).
func checkHAProxy(ctx context.Context, ve *variantEnv, rep *SuiteReport) error {
	if ve == nil {
		return nil
	}
	const timeout = 5 * time.Second
	addr, _ := ve.env.route(ve.env.seeds[0])
	_, perr := oneConn(ctx, addr, nil, timeout)
	if perr == nil {
		return fmt.Errorf("%w: the %s relay %s answered a plaintext ApiVersions", ErrTLSNotInForce, tlsHAProxy, addr)
	}
	st, err := oneConn(ctx, addr, ve.env.tls, timeout)
	if err != nil {
		return fmt.Errorf("%w: ApiVersions over TLS to the %s relay %s: %v", ErrTLSNotInForce, tlsHAProxy, addr, err)
	}
	if st == nil || !st.HandshakeComplete || len(st.VerifiedChains) == 0 {
		return errors.New("no verified handshake with the haproxy relay " + addr)
	}
	for i := range rep.Variants {
		if v := &rep.Variants[i]; v.Name == tlsHAProxy {
			v.Probe = fmt.Sprintf("ApiVersions answered over %s (%s, %s, chain verified); plaintext ApiVersions refused: %v",
				tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite), st.CurveID, perr)
			v.ProbeOK = true
		}
	}
	return nil
}
