package console_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/auth"
	"github.com/tollgate-kafka/tollgate/console"
)

// runEnv runs a console command with the environment env (nothing else
// of the process's) and no -b unless args carry it.
func runEnv(t *testing.T, cmd func(context.Context, []string, console.IO) int, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := cmd(ctx, args, console.IO{In: strings.NewReader(stdin), Out: &out, Err: &errb, Getenv: func(k string) string { return env[k] }})
	return result{out.String(), errb.String(), code}
}

func writeFile(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBrokersPrecedence: -b beats $TOLLGATE_BROKERS, which beats the
// profile's brokers; the default profile is ~/.config/tollgate/console.yaml
// ($XDG_CONFIG_HOME first), $TOLLGATE_PROFILE or --profile name another,
// and a profile that was named must exist and parse.
func TestBrokersPrecedence(t *testing.T) {
	b := builtin(t, "")
	run(t, console.Topic, b.addr, "", "create", "seen", "-p", "1").ok(t, "create")
	home := t.TempDir()
	writeFile(t, filepath.Join(home, ".config", "tollgate", "console.yaml"), "brokers: ["+b.addr+"]\n")
	env := map[string]string{"HOME": home}
	if out := runEnv(t, console.Topic, env, "", "list").ok(t, "list from the default profile").out; !strings.Contains(out, "seen") {
		t.Fatalf("list: %q", out)
	}
	xdg := t.TempDir()
	writeFile(t, filepath.Join(xdg, "tollgate", "console.yaml"), "brokers: 127.0.0.1:1\n")
	runEnv(t, console.Topic, map[string]string{"HOME": home, "XDG_CONFIG_HOME": xdg}, "", "list").
		oneLineError(t, "XDG profile", console.ExitUnreachable, "cannot reach any broker at 127.0.0.1:1")

	env["TOLLGATE_BROKERS"] = "127.0.0.1:1"
	runEnv(t, console.Topic, env, "", "list").oneLineError(t, "env over profile", console.ExitUnreachable, "cannot reach any broker at 127.0.0.1:1")
	runEnv(t, console.Topic, env, "", "list", "-b", b.addr).ok(t, "flag over env")
	delete(env, "TOLLGATE_BROKERS")

	other := writeFile(t, filepath.Join(t.TempDir(), "other.yaml"), "brokers: [127.0.0.1:1]\n")
	runEnv(t, console.Topic, env, "", "list", "--profile", other).oneLineError(t, "--profile", console.ExitUnreachable, "127.0.0.1:1")
	env["TOLLGATE_PROFILE"] = other
	runEnv(t, console.Topic, env, "", "list").oneLineError(t, "$TOLLGATE_PROFILE", console.ExitUnreachable, "127.0.0.1:1")
	runEnv(t, console.Topic, env, "", "list", "--profile", filepath.Join(t.TempDir(), "missing.yaml")).
		oneLineError(t, "missing named profile", console.ExitUsage, "missing.yaml")
	bad := writeFile(t, filepath.Join(t.TempDir(), "bad.yaml"), "brokers: [x]\nbrokres: [y]\n")
	runEnv(t, console.Topic, env, "", "list", "--profile", bad).oneLineError(t, "bad profile", console.ExitUsage, "line 2: field brokres not found")
}

// TestProfileTLSAndSASL: a profile carries the TLS and SASL settings the
// flags take (paths relative to the profile), and produce still shows
// the broker's reasons over TLS.
func TestProfileTLSAndSASL(t *testing.T) {
	dir := t.TempDir()
	writeCerts(t, dir)
	users := auth.NewUsers()
	if err := users.Set("alice", "wonderland", auth.MinIterations); err != nil {
		t.Fatal(err)
	}
	if err := users.Save(filepath.Join(dir, "users.yaml")); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, `
listeners:
  - listen: "127.0.0.1:0"
    tls: { cert: `+filepath.Join(dir, "server.pem")+`, key: `+filepath.Join(dir, "server.key")+` }
    sasl: { mechanisms: [SCRAM-SHA-256], users_file: `+filepath.Join(dir, "users.yaml")+` }
broker: { data_dir: `+t.TempDir()+`, fsync: never }
admin: { listen: "off" }
`)
	addr := g.Server.Addr(0).String()
	writeFile(t, filepath.Join(dir, "pw"), "wonderland\n")
	prof := writeFile(t, filepath.Join(dir, "console.yaml"), `
brokers: `+addr+`
tls: { ca: ca.pem }
sasl: { mechanism: SCRAM-SHA-256, username: alice, password_file: pw }
`)
	env := map[string]string{"TOLLGATE_PROFILE": prof}
	runEnv(t, console.Topic, env, "", "create", "secure", "-p", "1", "-c", "cleanup.policy=compact").ok(t, "create over TLS+SCRAM")
	runEnv(t, console.Produce, env, "k:v\n", "secure", "-k", ":").ok(t, "produce over TLS+SCRAM")
	r := runEnv(t, console.Produce, env, "keyless\n", "secure")
	if r.code != console.ExitFailed || !strings.Contains(r.err, "Compacted topic cannot accept message without key in topic partition secure-0.") {
		t.Fatalf("keyless produce over TLS: exit %d, stderr %q", r.code, r.err)
	}
	runEnv(t, console.Topic, env, "", "list", "--sasl-username", "mallory").
		oneLineError(t, "a flag over the profile", console.ExitUnreachable, "SASL_AUTHENTICATION_FAILED")
}

// writeCerts writes a CA (ca.pem) and a server certificate for 127.0.0.1
// (server.pem, server.key) in dir.
func writeCerts(t *testing.T, dir string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	for name, blk := range map[string]*pem.Block{
		"ca.pem": {Type: "CERTIFICATE", Bytes: caDER}, "server.pem": {Type: "CERTIFICATE", Bytes: der},
		"server.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		writeFile(t, filepath.Join(dir, name), string(pem.EncodeToMemory(blk)))
	}
}
