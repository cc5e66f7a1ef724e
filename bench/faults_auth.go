//go:build linux

package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The credential faults (issue 23): what the gateway's clients see while
// the credentials between the gateway and its upstream change under load.
// The upstream is a three-broker kfake in this process, listening with TLS
// (tls-rotate) or SASL/SCRAM-SHA-512 (sasl-password); the gateway is the
// tollgate binary, with upstream.tls or upstream.sasl, and its admin
// listener on so that the runner reads its metrics. The records are judged
// by the checker of faults.go.
//
// kfake, like Kafka, does not re-check open connections when a
// certificate or a password changes: only new dials see the change. A
// gateway with long-lived upstream connections may go on for hours before
// it dials again (a broker restart, a KIP-368 re-authentication, a new
// client). The runner makes that moment now: after each change it closes
// every connection the upstream has accepted (as a rolling restart of the
// brokers would), so every session of the gateway dials again.
//
// tls-rotate, each cycle:
//  1. the upstream's certificate is replaced by a new key and certificate
//     from the same CA: traffic goes on over the open connections; after
//     the connections are dropped the new dials verify the new
//     certificate (its serial is served to them) with no dial error;
//  2. a new CA, in the order an operator rotates one: the gateway's
//     upstream.tls.ca file becomes old+new CA and the gateway is reloaded
//     (SIGHUP), the upstream serves a certificate of the new CA (new
//     dials verify), the CA file becomes the new CA alone and the gateway
//     is reloaded again (new dials verify): no dial error, which only
//     holds if a reload re-reads the CA file;
//  3. the wrong order: the upstream serves a certificate of a CA the
//     gateway does not trust yet. New dials fail, counted in
//     tollgate_upstream_dial_errors_total{reason="tls_certificate"}, and
//     clients see their connections reset (retriable) for authWindow;
//     then the CA file is replaced and the gateway reloaded: recovery is
//     measured from the reload;
//  4. mode sni: the gateway's own listener certificate is rewritten in
//     place (same CA, new serial) and the gateway reloaded; a new client
//     handshake is served the new serial.
//
// sasl-password, each cycle: the gateway's principal's password is changed
// on the upstream (AlterUserScramCredentials, as an operator would); open
// connections go on; after they are dropped every new gateway dial is
// refused, counted in
// tollgate_upstream_dial_errors_total{reason="sasl_authentication_failed"}
// and logged (rate-limited) with the principal and mechanism; clients see
// their connections reset, which kgo retries. After authWindow the
// gateway's password file gets the new password and the gateway is
// reloaded: recovery is measured from then.
//
// What the clients are expected to see during a broken window: no client
// error (kgo retries a reset connection and a refused dial; a produced
// record waits in its buffer), consumer polls may return retriable errors
// (counted as retried), members may lose their group session (group
// redeliveries, commit errors: reported, not failed on). The row fails on
// any lost, duplicated or reordered record or client error, and when the
// fault did not happen (no new serial served, no dial error counted in a
// broken window, no log line).

// Credential fault names.
const (
	FaultTLSRotate    = "tls-rotate"    // the upstream's certificate (and CA) rotated; the gateway's listener certificate too (sni)
	FaultSASLPassword = "sasl-password" // the gateway's upstream SASL password changed upstream, then in the gateway
)

// AuthFaultNames are the credential faults, in run order (appended to
// FaultNames).
var AuthFaultNames = []string{FaultTLSRotate, FaultSASLPassword}

func init() { FaultNames = append(FaultNames, AuthFaultNames...) }

func isAuthFault(f string) bool { return slices.Contains(AuthFaultNames, f) }

// FaultNeedsGateway reports whether fault acts on the gateway or on its
// link to the upstream, so mode direct (no gateway) has nothing to run.
func FaultNeedsGateway(f string) bool {
	return f == FaultRestart || f == FaultKill || isAuthFault(f)
}

// authWindow is how long a broken credential (an untrusted certificate, a
// wrong password) stays broken before the gateway is fixed: longer than
// the gateway's dial retries of one session (the faults' dial_timeout,
// 2 s), so clients see their connections reset.
const authWindow = 4 * time.Second

// faultDialTimeout is the gateway's upstream.dial_timeout in the fault
// runs (faultEnv.configYAML).
const faultDialTimeout = 2 * time.Second

const (
	authMechanism = "SCRAM-SHA-512"
	authUser      = "tollgate" // the gateway's principal upstream
	authAdmin     = "admin"    // the runner's, to change the password
	authAdminPass = "admin-secret"
)

func authPassword(n int) string { return fmt.Sprintf("gateway-secret-%d", n) }

// runAuthFault is RunFault for the credential faults.
func runAuthFault(ctx context.Context, cfg FaultsConfig, fault, mode string) (FaultResult, error) {
	res := FaultResult{Fault: fault, Mode: mode, Cycles: cfg.Cycles}
	if mode == ModeDirect {
		return res, fmt.Errorf("faults: fault %s needs a gateway, mode %s has none", fault, mode)
	}
	ctx, cancel := context.WithTimeout(ctx, faultRunBound)
	defer cancel()
	dir, err := os.MkdirTemp(cfg.Dir, fault+"-"+mode+"-")
	if err != nil {
		return res, fmt.Errorf("faults: %w", err)
	}
	env := &faultEnv{cfg: cfg, mode: mode, dir: dir, topic: "faults"}
	defer env.close()
	a := &authRun{ctx: ctx, env: env, res: &res, conns: &connTracker{conns: map[*trackedConn]struct{}{}}}
	defer func() {
		if a.admin != nil {
			a.admin.Close()
		}
	}()

	opts := []kfake.Opt{kfake.NumBrokers(3), kfake.SeedTopics(cfg.Partitions, env.topic), kfake.ListenFn(a.conns.listen)}
	var upstreamYAML string
	switch fault {
	case FaultTLSRotate:
		if a.ca, err = newBenchCA("upstream CA 1"); err != nil {
			return res, err
		}
		leaf, err := a.ca.issue()
		if err != nil {
			return res, err
		}
		a.upCert = &rotatingCert{served: map[string]int{}}
		a.upCert.set(leaf)
		a.caFile = filepath.Join(dir, "upstream-ca.crt")
		if err := writeFileAtomic(a.caFile, a.ca.pem); err != nil {
			return res, err
		}
		opts = append(opts, kfake.TLS(a.conns.tlsConfig(&tls.Config{GetCertificate: a.upCert.get, MinVersion: tls.VersionTLS12})))
		upstreamYAML = fmt.Sprintf("  tls: {ca: %q}\n", a.caFile)
		if mode == ModeSNI {
			// The gateway's listener certificate, from a CA of the
			// runner's, so that it can be rotated (faultEnv.configYAML
			// takes e.tls and the files as they are).
			if a.listenerCA, err = newBenchCA("gateway listener CA"); err != nil {
				return res, err
			}
			env.pkiCert, env.pkiKey = filepath.Join(dir, "listener.crt"), filepath.Join(dir, "listener.key")
			if a.listenerSerial, err = a.writeListenerCert(); err != nil {
				return res, err
			}
			pool := x509.NewCertPool()
			pool.AddCert(a.listenerCA.cert)
			env.tls = &tls.Config{RootCAs: pool}
		}
	case FaultSASLPassword:
		opts = append(opts, kfake.EnableSASL(),
			kfake.Superuser(authMechanism, authAdmin, authAdminPass),
			kfake.Superuser(authMechanism, authUser, authPassword(0)))
		a.pwFile = filepath.Join(dir, "upstream-password")
		if err := writeFileAtomic(a.pwFile, []byte(authPassword(0)+"\n")); err != nil {
			return res, err
		}
		upstreamYAML = fmt.Sprintf("  sasl: {mechanism: %s, username: %s, password_file: %q}\n", authMechanism, authUser, a.pwFile)
	default:
		return res, fmt.Errorf("faults: unknown credential fault %q", fault)
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return res, fmt.Errorf("faults: kfake: %w", err)
	}
	env.kfake = c
	if fault == FaultSASLPassword {
		a.admin, err = kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
			kgo.SASL(scram.Auth{User: authAdmin, Pass: authAdminPass}.AsSha512Mechanism()))
		if err != nil {
			return res, fmt.Errorf("faults: upstream admin client: %w", err)
		}
	}
	if err := a.startGateway(ctx, c.ListenAddrs(), upstreamYAML); err != nil {
		return res, err
	}
	w, err := env.startWork(ctx)
	if err != nil {
		return res, err
	}
	a.w = w
	if !a.hold(ctx) {
		a.fail("no records acknowledged before the fault")
	}
	for cycle := 0; cycle < cfg.Cycles && len(res.Errors) == 0; cycle++ {
		switch fault {
		case FaultTLSRotate:
			a.tlsCycle(ctx, cycle+1)
		case FaultSASLPassword:
			a.saslCycle(ctx, cycle+1)
		}
		if len(res.Errors) == 0 && !a.hold(ctx) {
			a.fail("traffic did not resume after fault %d", cycle+1)
		}
	}
	w.finish(ctx, &res)
	res.Impairment = strings.Join(a.notes, "; ")
	if !res.OK() && cfg.Log != nil {
		fmt.Fprintf(cfg.Log, "faults: %s / %s failed: %+v\ngateway log (last lines):\n%s\n", fault, mode, res, env.gwLogs())
	}
	return res, nil
}

// authRun is one credential fault run.
type authRun struct {
	ctx   context.Context // the run's
	env   *faultEnv
	w     *faultWork
	res   *FaultResult
	notes []string // what each step did and measured (FaultResult.Impairment)

	adminAddr string       // the gateway's admin listener (metrics)
	conns     *connTracker // every connection the upstream accepted

	// tls-rotate
	ca             *benchCA // the CA the upstream's certificate is from
	caFile         string   // the gateway's upstream.tls.ca
	upCert         *rotatingCert
	listenerCA     *benchCA // mode sni: the gateway's listener certificate
	listenerSerial string

	// sasl-password
	pwFile   string
	password int         // authPassword(password) is the current one
	admin    *kgo.Client // the runner's own client to the upstream
	saslLine string      // the first log line of a refused login
}

func (a *authRun) fail(format string, args ...any) {
	a.res.Errors = append(a.res.Errors, fmt.Sprintf(format, args...))
}

func (a *authRun) note(format string, args ...any) {
	a.notes = append(a.notes, fmt.Sprintf(format, args...))
}

// hold lets traffic flow for Hold and until at least 50 more records are
// acknowledged.
func (a *authRun) hold(ctx context.Context) bool {
	t := time.NewTimer(a.env.cfg.Hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return false
	}
	return a.acked(ctx, 50)
}

// acked waits until n more records are acknowledged.
func (a *authRun) acked(ctx context.Context, n int64) bool {
	start := a.w.acks.Load()
	for a.w.acks.Load() < start+n {
		if ctx.Err() != nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// recovered waits for a record acknowledged and one consumed after end,
// and after a connection the upstream accepted after end (an answer read
// over a connection just dropped can be acknowledged a moment later), and
// records the recovery (from end) and outage (from start).
// A rotation that should not break anything gives up at once when
// broken reports true (polled every 200 ms).
func (a *authRun) recovered(ctx context.Context, start, end time.Time, broken func() bool) bool {
	var since time.Time
	ok := waitFor(ctx, faultRunBound, func() bool {
		since = a.conns.lastAccept()
		return since.After(end)
	})
	s := since.UnixNano()
	for next := time.Now(); ok && (a.w.lastAck.Load() <= s || a.w.lastCons.Load() <= s); {
		if ctx.Err() != nil {
			ok = false
			break
		}
		if broken != nil && time.Now().After(next) {
			if broken() {
				return false
			}
			next = time.Now().Add(200 * time.Millisecond)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !ok {
		a.fail("no produce and consume succeeded after the fault within %v", faultRunBound)
		return false
	}
	d := time.Since(end)
	a.res.Recovery = max(a.res.Recovery, d)
	a.res.Outage = max(a.res.Outage, end.Sub(start)+d)
	return true
}

// startGateway is faultEnv.startGateway with the upstream's credentials
// (upstreamYAML: lines inside upstream:) and the admin listener on, for
// the metrics.
func (a *authRun) startGateway(ctx context.Context, upstreams []string, upstreamYAML string) error {
	// The admin port, then the bootstrap and brokers 0-2
	// (port-per-broker); below the bootstrap, as the broker ports of node
	// ids 0-99 above it must not collide with it.
	return a.env.startGatewayWith(ctx, 4, func(adminPort int) (string, int, error) {
		base := adminPort + 1
		y, err := a.env.configYAML(base, upstreams)
		if err != nil {
			return "", 0, err
		}
		a.adminAddr = "127.0.0.1:" + strconv.Itoa(adminPort)
		for _, r := range []struct{ old, new string }{
			{"  metadata_refresh: 1s\n", "  metadata_refresh: 1s\n" + upstreamYAML},
			{"admin:\n  listen: \"off\"\n", "admin:\n  listen: " + a.adminAddr + "\n"},
		} {
			if strings.Count(y, r.old) != 1 {
				return "", 0, fmt.Errorf("faults: the gateway's configuration has no single %q to extend:\n%s", r.old, y)
			}
			y = strings.Replace(y, r.old, r.new, 1)
		}
		return y, base, nil
	})
}

// metric sums the gateway's samples of name whose labels contain every
// one of labels (`reason="tls"`).
func (a *authRun) metric(ctx context.Context, name string, labels ...string) (float64, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, "http://"+a.adminAddr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("gateway metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("gateway metrics: %s", resp.Status)
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("gateway metrics: %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// dialErrors is tollgate_upstream_dial_errors_total for reason, every
// broker; -1 (and a failure recorded) if the metrics cannot be read.
func (a *authRun) dialErrors(ctx context.Context, reason string) float64 {
	v, err := a.metric(ctx, "tollgate_upstream_dial_errors_total", `reason="`+reason+`"`)
	if err != nil {
		a.fail("%v", err)
		return -1
	}
	return v
}

// tlsDialErrors is every TLS reason of the dial errors.
func (a *authRun) tlsDialErrors(ctx context.Context) float64 {
	return a.dialErrors(ctx, "tls_certificate") + a.dialErrors(ctx, "tls")
}

// reload SIGHUPs the gateway and waits until it counted a successful
// reload.
func (a *authRun) reload(ctx context.Context) error {
	before, err := a.metric(ctx, "tollgate_policy_reloads_total", `result="ok"`)
	if err != nil {
		return err
	}
	failed, err := a.metric(ctx, "tollgate_policy_reloads_total", `result="failed"`)
	if err != nil {
		return err
	}
	if err := syscall.Kill(a.env.gw.cmd.Process.Pid, syscall.SIGHUP); err != nil {
		return fmt.Errorf("SIGHUP the gateway: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if n, err := a.metric(ctx, "tollgate_policy_reloads_total", `result="ok"`); err == nil && n > before {
			return nil
		}
		if n, err := a.metric(ctx, "tollgate_policy_reloads_total", `result="failed"`); err == nil && n > failed {
			return fmt.Errorf("the gateway refused the reload:\n%s", a.env.gw.tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("the gateway did not count a reload within 30s of SIGHUP")
}

// waitFor polls cond every 20 ms for up to bound.
func waitFor(ctx context.Context, bound time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(bound)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dropAll closes every connection the upstream accepted (those past
// their TLS handshake, connTracker) and returns when, and how many.
func (a *authRun) dropAll() (time.Time, int) {
	n := a.conns.dropAll()
	return time.Now(), n
}

// rotateVerified serves leaf from now on, drops the upstream's
// connections, and checks that the new dials were served leaf's serial
// and that traffic recovered with no TLS dial error.
func (a *authRun) rotateVerified(ctx context.Context, what string, leaf tls.Certificate) bool {
	tlsErrs := a.tlsDialErrors(ctx)
	serial := leaf.Leaf.SerialNumber.String()
	a.upCert.set(leaf)
	// Open connections keep their session: traffic goes on over them.
	if !a.acked(ctx, 20) {
		a.fail("%s: no record acknowledged over the open connections after the rotation", what)
		return false
	}
	served0 := a.upCert.count(serial)
	at, n := a.dropAll()
	if !a.recovered(ctx, at, at, a.tlsBroken(what, tlsErrs)) {
		return false
	}
	served := a.upCert.count(serial) - served0
	after := a.tlsDialErrors(ctx)
	a.note("%s: serial %s served to %d new dials after %d upstream connections dropped, %v TLS dial errors", what, serial, served, n, after-tlsErrs)
	if served == 0 {
		a.fail("%s: no new dial was served the new certificate (serial %s)", what, serial)
		return false
	}
	if after != tlsErrs {
		a.fail("%s: %v upstream TLS dial errors, want none:\n%s", what, after-tlsErrs, a.env.gw.tail())
		return false
	}
	return true
}

// tlsBroken returns a check for recovered: whether upstream TLS dials
// failed since the count was before (a failure recorded).
func (a *authRun) tlsBroken(what string, before float64) func() bool {
	return func() bool {
		if e := a.tlsDialErrors(a.ctx) - before; e != 0 {
			a.fail("%s: %v upstream TLS dial errors, want none:\n%s", what, e, a.env.gw.tail())
			return true
		}
		return false
	}
}

// tlsCycle is one cycle of tls-rotate (see the top of the file).
func (a *authRun) tlsCycle(ctx context.Context, cycle int) {
	// 1. Same CA, new key and certificate.
	leaf, err := a.ca.issue()
	if err != nil {
		a.fail("%v", err)
		return
	}
	if !a.rotateVerified(ctx, fmt.Sprintf("cycle %d same CA", cycle), leaf) {
		return
	}

	// 2. A new CA, trusted before it is served.
	next, err := newBenchCA(fmt.Sprintf("upstream CA %d", 2*cycle))
	if err != nil {
		a.fail("%v", err)
		return
	}
	if !a.trustCAs(ctx, "both CAs", a.ca, next) {
		return
	}
	// A handshake that began before the reload verifies against the old
	// CA alone: an operator serves the new CA's certificate once no such
	// handshake is left (the gateway reads upstream.tls at each dial, and
	// a handshake is bounded by the dial timeout).
	time.Sleep(faultDialTimeout)
	if leaf, err = next.issue(); err != nil {
		a.fail("%v", err)
		return
	}
	if !a.rotateVerified(ctx, fmt.Sprintf("cycle %d new CA (CA file old+new)", cycle), leaf) {
		return
	}
	a.ca = next
	if !a.trustCAs(ctx, "the new CA", a.ca) {
		return
	}
	tlsErrs := a.tlsDialErrors(ctx)
	at, n := a.dropAll()
	if !a.recovered(ctx, at, at, a.tlsBroken(fmt.Sprintf("cycle %d old CA removed", cycle), tlsErrs)) {
		return
	}
	if e := a.tlsDialErrors(ctx) - tlsErrs; e != 0 {
		a.fail("cycle %d: %v upstream TLS dial errors after the old CA was removed, want none", cycle, e)
		return
	}
	a.note("cycle %d: old CA removed, %d connections dropped, no TLS dial error", cycle, n)

	// 3. The wrong order: a certificate from a CA the gateway does not
	// trust yet.
	if next, err = newBenchCA(fmt.Sprintf("upstream CA %d", 2*cycle+1)); err != nil {
		a.fail("%v", err)
		return
	}
	if leaf, err = next.issue(); err != nil {
		a.fail("%v", err)
		return
	}
	certErrs := a.dialErrors(ctx, "tls_certificate")
	a.upCert.set(leaf)
	start, n := a.dropAll()
	acks0 := a.w.acks.Load()
	counted := waitFor(ctx, authWindow, func() bool { return a.dialErrors(ctx, "tls_certificate") > certErrs })
	time.Sleep(time.Until(start.Add(authWindow)))
	during := a.w.acks.Load() - acks0
	broken := a.dialErrors(ctx, "tls_certificate") - certErrs
	if !counted {
		a.fail("cycle %d: untrusted upstream certificate: no dial error counted (reason tls_certificate) within %v", cycle, authWindow)
		return
	}
	a.ca = next
	if !a.trustCAs(ctx, "the upstream's new CA", a.ca) {
		return
	}
	end := time.Now()
	if !a.recovered(ctx, start, end, nil) {
		return
	}
	time.Sleep(faultDialTimeout) // handshakes begun before the reload fail (and count) before the next step's baseline
	a.note("cycle %d untrusted CA for %v: %d connections dropped, %v dial errors (tls_certificate), %d records acknowledged meanwhile, then CA file replaced and reloaded", cycle, end.Sub(start).Round(time.Millisecond), n, broken, during)

	// 4. The gateway's listener certificate (mode sni).
	if a.listenerCA != nil {
		a.rotateListener(ctx, cycle)
	}
}

// trustCAs replaces the gateway's upstream.tls.ca file by cas and
// reloads; false (the run failed) if either step did.
func (a *authRun) trustCAs(ctx context.Context, what string, cas ...*benchCA) bool {
	var b []byte
	for _, ca := range cas {
		b = append(b, ca.pem...)
	}
	if err := writeFileAtomic(a.caFile, b); err != nil {
		a.fail("%v", err)
		return false
	}
	if err := a.reload(ctx); err != nil {
		a.fail("reload with %s: %v", what, err)
		return false
	}
	return true
}

// rotateListener rewrites the gateway's listener certificate and key in
// place (same CA, new serial), reloads, and checks a new client handshake
// is served the new serial while traffic goes on.
func (a *authRun) rotateListener(ctx context.Context, cycle int) {
	serial, err := a.writeListenerCert()
	if err != nil {
		a.fail("%v", err)
		return
	}
	if err := a.reload(ctx); err != nil {
		a.fail("reload after the listener certificate: %v", err)
		return
	}
	var got string
	ok := waitFor(ctx, 10*time.Second, func() bool {
		got = a.listenerServes(ctx)
		return got == serial
	})
	if !ok {
		a.fail("cycle %d: the gateway's listener serves serial %s, want the rotated %s", cycle, got, serial)
		return
	}
	if !a.acked(ctx, 20) {
		a.fail("cycle %d: no record acknowledged after the listener certificate rotated", cycle)
		return
	}
	a.note("cycle %d listener certificate: serial %s replaced by %s, served to a new handshake", cycle, a.listenerSerial, serial)
	a.listenerSerial = serial
}

// listenerServes dials the gateway's listener as a client and returns the
// serial of the certificate it is served ("" on failure).
func (a *authRun) listenerServes(ctx context.Context) string {
	_, port, _ := net.SplitHostPort(a.env.seed)
	c := a.env.tls.Clone()
	c.ServerName = benchSNIApex
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second}, Config: c}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return ""
	}
	defer conn.Close()
	cs := conn.(*tls.Conn).ConnectionState()
	if len(cs.PeerCertificates) == 0 {
		return ""
	}
	return cs.PeerCertificates[0].SerialNumber.String()
}

// writeListenerCert writes a new listener certificate and key (key first:
// the gateway keeps its pair until both files match) and returns its
// serial.
func (a *authRun) writeListenerCert() (string, error) {
	leaf, err := a.listenerCA.issue(benchSNIApex, "*."+benchSNIApex)
	if err != nil {
		return "", err
	}
	certPEM, keyPEM, err := leafPEM(leaf)
	if err != nil {
		return "", err
	}
	if err := writeFileAtomic(a.env.pkiKey, keyPEM); err != nil {
		return "", err
	}
	if err := writeFileAtomic(a.env.pkiCert, certPEM); err != nil {
		return "", err
	}
	return leaf.Leaf.SerialNumber.String(), nil
}

// saslCycle is one cycle of sasl-password (see the top of the file).
func (a *authRun) saslCycle(ctx context.Context, cycle int) {
	failed0 := a.dialErrors(ctx, "sasl_authentication_failed")
	a.password++
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	r, err := kadm.NewClient(a.admin).AlterUserSCRAMs(actx, nil, []kadm.UpsertSCRAM{{
		User: authUser, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: authPassword(a.password),
	}})
	cancel()
	if err == nil {
		for _, u := range r {
			err = errors.Join(err, u.Err)
		}
	}
	if err != nil {
		a.fail("cycle %d: change the upstream password: %v", cycle, err)
		return
	}
	// Open connections keep their session: traffic goes on over them.
	if !a.acked(ctx, 20) {
		a.fail("cycle %d: no record acknowledged over the open connections after the password changed", cycle)
		return
	}
	start, n := a.dropAll()
	acks0 := a.w.acks.Load()
	counted := waitFor(ctx, authWindow, func() bool { return a.dialErrors(ctx, "sasl_authentication_failed") > failed0 })
	time.Sleep(time.Until(start.Add(authWindow)))
	during := a.w.acks.Load() - acks0
	refused := a.dialErrors(ctx, "sasl_authentication_failed") - failed0
	logged := a.saslLogLines()
	if !counted {
		a.fail("cycle %d: wrong password: no dial error counted (reason sasl_authentication_failed) within %v", cycle, authWindow)
		return
	}
	if logged == 0 {
		a.fail("cycle %d: wrong password: no log line names the principal %q and %s:\n%s", cycle, authUser, authMechanism, a.env.gw.tail())
		return
	}
	if err := writeFileAtomic(a.pwFile, []byte(authPassword(a.password)+"\n")); err != nil {
		a.fail("%v", err)
		return
	}
	if err := a.reload(ctx); err != nil {
		a.fail("reload with the new password: %v", err)
		return
	}
	end := time.Now()
	if !a.recovered(ctx, start, end, nil) {
		return
	}
	a.note("cycle %d wrong password for %v: %d connections dropped, %v dial errors (sasl_authentication_failed), %d log lines naming principal and mechanism, %d records acknowledged meanwhile, then password file replaced and reloaded",
		cycle, end.Sub(start).Round(time.Millisecond), n, refused, logged, during)
	if cycle == 1 {
		a.note("the first such line: %s", a.saslLine)
	}
}

// saslLogLines counts the gateway's last log lines that report the
// refused upstream login with the principal and the mechanism.
func (a *authRun) saslLogLines() int {
	n := 0
	for _, l := range strings.Split(a.env.gw.tail(), "\n") {
		if strings.Contains(l, "principal") && strings.Contains(l, authUser) && strings.Contains(l, authMechanism) &&
			strings.Contains(l, "SASL_AUTHENTICATION_FAILED") {
			n++
			if a.saslLine == "" {
				a.saslLine = l
			}
		}
	}
	return n
}

// connTracker records every connection kfake's listeners accept, so
// that the runner can close them all (the upstream dropping its clients).
//
// With TLS (tlsConfig), a connection counts only once its handshake is
// done: closing one mid-handshake fails the gateway's dial with a TLS
// error (reason "tls") that the runner would take for a broken rotation,
// and such a connection is a new dial anyway, made after whatever the
// runner changed. dropAll leaves those alone.
type connTracker struct {
	mu       sync.Mutex
	conns    map[*trackedConn]struct{}
	tls      bool         // connections start handshaking (tlsConfig)
	accepted atomic.Int64 // unix nanoseconds of the latest accept
}

func (t *connTracker) lastAccept() time.Time { return time.Unix(0, t.accepted.Load()) }

func (t *connTracker) listen(network, addr string) (net.Listener, error) {
	l, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	return &trackedListener{Listener: l, t: t}, nil
}

// tlsConfig is base for kfake's listeners, marking each connection's
// handshake done in the server's VerifyConnection, which runs for every
// handshake: in TLS 1.3 (what the gateway negotiates) after the server's
// last flight is written, in 1.2 just before its Finished, so a drop
// there could still fail a 1.2 dial. base's own VerifyConnection and
// GetConfigForClient must be nil. Call before the listeners accept.
func (t *connTracker) tlsConfig(base *tls.Config) *tls.Config {
	t.tls = true
	cfg := base.Clone()
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		tc, ok := hello.Conn.(*trackedConn)
		if !ok {
			return nil, nil
		}
		c := base.Clone()
		c.VerifyConnection = func(tls.ConnectionState) error {
			tc.handshaking.Store(false)
			return nil
		}
		return c, nil
	}
	return cfg
}

// dropAll closes every connection not in its TLS handshake and returns
// how many.
func (t *connTracker) dropAll() int {
	t.mu.Lock()
	cs := make([]*trackedConn, 0, len(t.conns))
	for c := range t.conns {
		if !c.handshaking.Load() {
			cs = append(cs, c)
		}
	}
	t.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
	return len(cs)
}

type trackedListener struct {
	net.Listener
	t *connTracker
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, t: l.t}
	tc.handshaking.Store(l.t.tls)
	l.t.mu.Lock()
	l.t.conns[tc] = struct{}{}
	l.t.mu.Unlock()
	l.t.accepted.Store(time.Now().UnixNano())
	return tc, nil
}

type trackedConn struct {
	net.Conn
	t           *connTracker
	once        sync.Once
	handshaking atomic.Bool // accepted with TLS, handshake not yet done
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.t.mu.Lock()
		delete(c.t.conns, c)
		c.t.mu.Unlock()
	})
	return c.Conn.Close()
}

// rotatingCert is the upstream's certificate, replaceable at any time,
// and how many handshakes each serial was served to.
type rotatingCert struct {
	cur    atomic.Pointer[tls.Certificate]
	mu     sync.Mutex
	served map[string]int
}

func (r *rotatingCert) set(c tls.Certificate) { r.cur.Store(&c) }

func (r *rotatingCert) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c := r.cur.Load()
	r.mu.Lock()
	r.served[c.Leaf.SerialNumber.String()]++
	r.mu.Unlock()
	return c, nil
}

func (r *rotatingCert) count(serial string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.served[serial]
}

// writeFileAtomic replaces path by a file holding b (a rename: a reader
// sees the old file or the new one, never half of it).
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}
