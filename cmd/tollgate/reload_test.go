package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPolicyReloadThroughBinary: the real binary applies a changed policy
// file (and SIGHUP) without dropping the client's connection, and refuses
// an invalid file while the rules in force stay.
func TestPolicyReloadThroughBinary(t *testing.T) {
	bin := tollgateBinary(t)
	cfgFile := filepath.Join(t.TempDir(), "tollgate.yaml")
	write := func(body string) {
		t.Helper()
		// A new file renamed into place, as editors and config managers do.
		tmp := cfgFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfgFile); err != nil {
			t.Fatal(err)
		}
	}
	allow := "policy:\n  default: allow\n"
	deny := "policy:\n  rules:\n    - name: freeze\n      match: { api: [Produce] }\n      action: deny\n"
	write(allow)
	c, err := startTollgate(t, bin, t.TempDir(), "127.0.0.1:0", "--config", cfgFile, "--log-level", "debug")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.stop() })
	createTestTopic(t, c.addr, "reload", 1)
	cl := testClient(t, c.addr, kgo.DefaultProduceTopic("reload"), kgo.RecordRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produce := func() error { return cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr() }
	until := func(what string, ok func(error) bool) {
		t.Helper()
		for {
			err := produce()
			if ok(err) {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("waiting for %s: last produce error %v\n%s", what, err, c.output())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if err := produce(); err != nil {
		t.Fatal(err)
	}
	opened := strings.Count(c.output(), "connection opened")
	write(deny)
	until("the deny rule (file change)", func(err error) bool { return errors.Is(err, kerr.TopicAuthorizationFailed) })

	write("policy:\n  rules:\n    - name: broken\n      match: { api: [NoSuchAPI] }\n      action: deny\n")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(c.output(), "configuration reload refused") {
		if time.Now().After(deadline) {
			t.Fatalf("invalid file not reported:\n%s", c.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := produce(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("after an invalid file the old rules must stay: %v", err)
	}

	// SIGHUP applies a change at once (the mtime poll would too, later).
	os.WriteFile(cfgFile, []byte(allow), 0o644)
	c.cmd.Process.Signal(syscall.SIGHUP)
	until("the allow policy (SIGHUP)", func(err error) bool { return err == nil })
	// kgo opens a metadata connection after an authorization error; what
	// must not happen is a produce connection being closed by the gateway.
	if strings.Contains(c.output(), "reason=denied") || strings.Contains(c.output(), "reason=malformed") {
		t.Errorf("a connection was closed during reloads:\n%s", c.output())
	}
	t.Logf("connections opened before reloads: %d, after: %d", opened, strings.Count(c.output(), "connection opened"))
}

// replaceFile writes body to a new file renamed over path, as editors and
// configuration managers do.
func replaceFile(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// reloadAndWait sends SIGHUP and waits for want in the log after its
// first from bytes, and returns the log from there. (The file poll may
// reload the same file too; each reload reads the file as it is then, so
// the test waits for what the new content makes the gateway log, not for
// a number of reloads.)
func reloadAndWait(t *testing.T, c *child, from int, want string) string {
	t.Helper()
	c.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := c.output()[from:]
		if strings.Contains(out, want) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %q after a reload:\n%s", want, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logField is the value of key= on the last log line with msg="msg"
// (or msg=msg).
func logField(out, msg, key string) string {
	val := ""
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "msg=\""+msg+"\"") && !strings.Contains(line, "msg="+msg+" ") {
			continue
		}
		if _, rest, ok := strings.Cut(line, " "+key+"="); ok {
			if strings.HasPrefix(rest, "\"") {
				val, _, _ = strings.Cut(rest[1:], "\"")
			} else {
				val, _, _ = strings.Cut(rest, " ")
			}
		}
	}
	return val
}

// apiVersions sends an ApiVersions v0 request on conn and reads the
// response frame: an error means the gateway did not answer (it closed
// the connection).
func apiVersions(conn net.Conn) error {
	// size, key 18, version 0, correlation id 1, client id "t"
	req := []byte{0, 0, 0, 11, 0, 18, 0, 0, 0, 0, 0, 1, 0, 1, 't'}
	if _, err := conn.Write(req); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > 1<<20 {
		return fmt.Errorf("response size %d", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(conn, body); err != nil {
		return err
	}
	if binary.BigEndian.Uint32(body) != 1 {
		return errors.New("wrong correlation id")
	}
	return nil
}

// scrape returns the lines of the admin server's /metrics that start with
// name.
func scrape(t *testing.T, admin, name string) []string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name) {
			out = append(out, line)
		}
	}
	return out
}

// TestReloadAppliesOrNamesRestart: a reload applies a changed connection
// limit to the next client (an open connection stays), applies the audit
// file's max_size, and names every field it cannot apply (listen,
// audit.sink.keep) in one WARN line and in
// tollgate_config_reload_pending_restart, which a reload that brings a
// value back clears. A file that does not validate changes nothing and is
// counted as a failed reload.
func TestReloadAppliesOrNamesRestart(t *testing.T) {
	bin := tollgateBinary(t)
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "tollgate.yaml")
	config := func(listen string, maxConns int, maxSize string, keep int) string {
		return fmt.Sprintf("listeners:\n  - listen: %s\nbroker: { data_dir: %s }\nadmin: { listen: 127.0.0.1:0 }\n"+
			"limits: { max_connections: %d }\naudit:\n  level: summary\n  sink: { file: %s, max_size: %s, keep: %d }\n",
			listen, filepath.Join(dir, "data"), maxConns, filepath.Join(dir, "audit.jsonl"), maxSize, keep)
	}
	replaceFile(t, cfgFile, config("127.0.0.1:0", 100, "1MiB", 3))
	c, err := startTollgateArgs(t, bin, "--config", cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.stop() })
	deadline := time.Now().Add(20 * time.Second)
	admin := ""
	for admin == "" {
		if admin = logField(c.output(), "admin server", "addr"); admin == "" && time.Now().After(deadline) {
			t.Fatalf("no admin address:\n%s", c.output())
		}
		time.Sleep(10 * time.Millisecond)
	}
	held, err := net.Dial("tcp", c.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := apiVersions(held); err != nil {
		t.Fatal(err)
	}

	// listen and keep need a restart; max_connections and max_size apply.
	from := len(c.output())
	replaceFile(t, cfgFile, config("127.0.0.1:1", 1, "2MiB", 4))
	out := reloadAndWait(t, c, from, "configuration reloaded")
	if got := logField(out, "configuration changed, needs a restart", "fields"); got != "listeners[0].listen,audit.sink.keep" {
		t.Errorf("restart fields logged %q, want listeners[0].listen,audit.sink.keep\n%s", got, out)
	}
	if got := logField(out, "configuration reloaded", "applied"); got != "limits.max_connections,audit.sink.max_size" {
		t.Errorf("applied fields logged %q, want limits.max_connections,audit.sink.max_size\n%s", got, out)
	}
	if !strings.Contains(out, "level=WARN msg=\"configuration changed, needs a restart\"") {
		t.Errorf("the restart fields are not a WARN line:\n%s", out)
	}
	pending := scrape(t, admin, "tollgate_config_reload_pending_restart{")
	want := []string{`tollgate_config_reload_pending_restart{field="audit.sink.keep"} 1`, `tollgate_config_reload_pending_restart{field="listeners[0].listen"} 1`}
	if !slices.Equal(pending, want) {
		t.Errorf("pending restart gauge:\n%q\nwant\n%q", pending, want)
	}

	// The held connection stays and is served; a new one is over the
	// limit of 1 and closed at once.
	if err := apiVersions(held); err != nil {
		t.Fatalf("the open connection after lowering max_connections: %v", err)
	}
	over, err := net.Dial("tcp", c.addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := apiVersions(over); err == nil {
		t.Fatal("a second connection was served with max_connections: 1")
	}
	over.Close()
	// The gateway closes a refused socket, then counts it: poll.
	var got []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		got = scrape(t, admin, `tollgate_connections_refused_total{listener="default",reason="max_connections"}`)
		if len(got) == 1 && !strings.HasSuffix(got[0], " 0") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(got) != 1 || strings.HasSuffix(got[0], " 0") {
		t.Errorf("refusals counted: %q", got)
	}

	// An invalid file: refused and counted; the limit in force stays.
	from = len(c.output())
	replaceFile(t, cfgFile, config("127.0.0.1:1", -1, "2MiB", 4))
	out = reloadAndWait(t, c, from, "configuration reload refused")
	if !strings.Contains(out, "limits.max_connections") {
		t.Errorf("the refusal does not name the field:\n%s", out)
	}
	if got := scrape(t, admin, `tollgate_policy_reloads_total{result="failed"}`); len(got) != 1 || strings.HasSuffix(got[0], " 0") {
		t.Errorf("failed reloads: %q", got)
	}
	if err := apiVersions(held); err != nil {
		t.Fatalf("the open connection after a refused reload: %v", err)
	}

	// listen back: its gauge clears; the limit back: a client is served.
	from = len(c.output())
	replaceFile(t, cfgFile, config("127.0.0.1:0", 100, "2MiB", 4))
	reloadAndWait(t, c, from, "pending_restart=1")
	pending = scrape(t, admin, "tollgate_config_reload_pending_restart{")
	if want := want[:1]; !slices.Equal(pending, want) {
		t.Errorf("pending restart gauge after listen came back:\n%q\nwant\n%q", pending, want)
	}
	again, err := net.Dial("tcp", c.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := apiVersions(again); err != nil {
		t.Fatalf("a second connection after max_connections went back to 100: %v", err)
	}
	if got := scrape(t, admin, `tollgate_policy_reloads_total{result="ok"}`); len(got) != 1 || strings.HasSuffix(got[0], " 0") {
		t.Errorf("ok reloads: %q", got)
	}
}

// TestReloadRotatesListenerCertificate: a listener's certificate and key
// are replaced in place by ones from another CA, with the same size and
// modification time (so no stat check can see it); after SIGHUP a new
// TLS client is served the new certificate without a restart, and a
// connection opened before keeps being served.
func TestReloadRotatesListenerCertificate(t *testing.T) {
	bin := tollgateBinary(t)
	dir := t.TempDir()
	mk := func(name string) (string, string, *x509.CertPool) {
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		_, cert, key, pool := writeCerts(t, d)
		return cert, key, pool
	}
	oldCert, oldKey, oldPool := mk("old")
	newCert, newKey, newPool := mk("new")
	// Both versions padded (PEM allows trailing newlines) to one size.
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pad := func(a, b []byte) ([]byte, []byte) {
		n := max(len(a), len(b))
		return append(a, bytes.Repeat([]byte("\n"), n-len(a))...), append(b, bytes.Repeat([]byte("\n"), n-len(b))...)
	}
	certV1, certV2 := pad(read(oldCert), read(newCert))
	keyV1, keyV2 := pad(read(oldKey), read(newKey))
	liveCert, liveKey := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	os.WriteFile(liveCert, certV1, 0o600)
	os.WriteFile(liveKey, keyV1, 0o600)

	cfgFile := filepath.Join(dir, "tollgate.yaml")
	replaceFile(t, cfgFile, "listeners:\n  - listen: 127.0.0.1:0\n    tls: { cert: "+liveCert+", key: "+liveKey+" }\n")
	c, err := startTollgate(t, bin, filepath.Join(dir, "data"), "127.0.0.1:0", "--config", cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.stop() })
	dial := func(pool *x509.CertPool) (*tls.Conn, error) {
		return tls.Dial("tcp", c.addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	}
	held, err := dial(oldPool)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := apiVersions(held); err != nil {
		t.Fatal(err)
	}

	// Rotate in place: same inode, same size, same modification time.
	for _, f := range []struct {
		path string
		body []byte
	}{{liveCert, certV2}, {liveKey, keyV2}} {
		fi, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, f.body, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f.path, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	reloadAndWait(t, c, 0, "configuration reloaded")

	fresh, err := dial(newPool)
	if err != nil {
		t.Fatalf("a new client trusting only the new CA after the reload: %v\n%s", err, c.output())
	}
	if err := apiVersions(fresh); err != nil {
		t.Fatal(err)
	}
	fresh.Close()
	if stale, err := dial(oldPool); err == nil {
		stale.Close()
		t.Fatal("the old certificate is still served after the reload")
	}
	cl := testClient(t, c.addr, kgo.DialTLSConfig(&tls.Config{RootCAs: newPool, MinVersion: tls.VersionTLS12}),
		kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("rotated"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("after rotation")).FirstErr(); err != nil {
		t.Fatalf("kgo produce with the new CA: %v", err)
	}
	if err := apiVersions(held); err != nil {
		t.Fatalf("the connection opened before the rotation: %v", err)
	}
}
