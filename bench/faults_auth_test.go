//go:build linux

package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestAuthFaults runs the credential faults (faults_auth.go) in every
// listener mode at CI size (one cycle each) and asserts the checker's
// invariants as TestFaults does: nothing lost, duplicated or reordered, no
// client error. RunFault itself fails a run whose fault did not happen: a
// rotated certificate never served to a new dial, a broken window with no
// dial error counted, a refused login never logged with its principal and
// mechanism, a reload that did not re-read the CA (dial errors after a
// rotation in the right order). The test checks the runner's account of
// it too. No timing is asserted. TOLLGATE_FAULT_MODES picks modes.
func TestAuthFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tollgate and runs six fault runs")
	}
	runFaultMatrix(t, envList("TOLLGATE_AUTH_FAULTS", AuthFaultNames), func(t *testing.T, f, m string, r FaultResult) {
		// The runner's account of the fault (what RunFault
		// checked): each step left its line.
		want := []string{"connections dropped", "dial errors (sasl_authentication_failed)", "log lines naming principal and mechanism"}
		if f == FaultTLSRotate {
			want = []string{"same CA: serial", "new CA (CA file old+new): serial", "old CA removed", "dial errors (tls_certificate)"}
			if m == ModeSNI {
				want = append(want, "listener certificate: serial")
			}
		}
		for _, w := range want {
			if !strings.Contains(r.Impairment, w) {
				t.Errorf("the run's account has no %q: %s", w, r.Impairment)
			}
		}
	})
}

// TestAuthFaultDirect: the credential faults need a gateway.
func TestAuthFaultDirect(t *testing.T) {
	for _, f := range AuthFaultNames {
		if !FaultNeedsGateway(f) {
			t.Errorf("FaultNeedsGateway(%s) = false", f)
		}
		if _, err := RunFault(context.Background(), FaultsConfig{Tollgate: "/nonexistent"}, f, ModeDirect); err == nil {
			t.Errorf("%s in mode direct: no error", f)
		}
	}
}

// TestConnTrackerSparesHandshakes: the runner's dropAll leaves a TLS
// connection whose handshake has not finished (closing it would fail the
// gateway's dial with a TLS error the runner then blames on the
// rotation; CI saw one), and closes it once the handshake is done.
func TestConnTrackerSparesHandshakes(t *testing.T) {
	ca, err := newBenchCA("tracker test")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.issue()
	if err != nil {
		t.Fatal(err)
	}
	tr := &connTracker{conns: map[*trackedConn]struct{}{}}
	cfg := tr.tlsConfig(&tls.Config{Certificates: []tls.Certificate{leaf}, MinVersion: tls.VersionTLS12})
	ln, err := tr.listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := tls.NewListener(ln, cfg)
	defer tl.Close()
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }() // the first read runs the handshake
		}
	}()

	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	accepted := func() int { tr.mu.Lock(); defer tr.mu.Unlock(); return len(tr.conns) }
	if !waitFor(context.Background(), 5*time.Second, func() bool { return accepted() == 1 }) {
		t.Fatal("the connection was not accepted")
	}
	if n := tr.dropAll(); n != 0 {
		t.Fatalf("dropAll closed %d connections before their handshake", n)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	tc := tls.Client(raw, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake after dropAll: %v", err)
	}
	if !waitFor(context.Background(), 5*time.Second, func() bool { return tr.dropAll() == 1 }) {
		t.Fatal("dropAll never closed the connection after its handshake")
	}
	tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := tc.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after dropAll: %v, want the connection closed", err)
	}
}
