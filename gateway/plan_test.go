package gateway

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"os"
	"testing"

	"github.com/tollgate-kafka/tollgate/configs"
)

// TestProvisionTakesWhatValidateParsed: the plan is built from what
// configuration validation read and parsed (configs.TLSMaterial), not
// from the files read a second time. Replacing the certificate with junk
// between Validate and Provision proves it: Provision still succeeds, and
// the listener serves the certificate that was validated.
func TestProvisionTakesWhatValidateParsed(t *testing.T) {
	dir := t.TempDir()
	ca := newFileCA(t)
	cert, key := ca.write(t, dir, "gw", "gw.test")
	cfg, err := configs.Parse([]byte(fmt.Sprintf(`
listeners:
  - listen: "127.0.0.1:0"
    tls: { cert: %s, key: %s, client_ca: %s, principal_mapping_rules: ["RULE:^CN=(.*)$/$1/U"] }
broker: { data_dir: %s }
admin: { listen: "off" }
`, cert, key, cert, dir+"/data")), "plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	validated, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{cert, key} {
		if err := os.WriteFile(f, []byte("not PEM any more"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := Provision(cfg, quiet())
	if err != nil {
		t.Fatalf("Provision parsed the files again: %v", err)
	}
	defer plan.Close()
	lo := plan.proxy.Listeners[0]
	tc, err := lo.TLS.GetConfigForClient(nil)
	if err != nil || len(tc.Certificates) != 1 || tc.ClientCAs == nil {
		t.Fatalf("listener TLS = %+v, %v", tc, err)
	}
	if !bytes.Contains(validated, []byte("BEGIN CERTIFICATE")) || lo.Principal == nil {
		t.Fatal("test setup: no certificate or no principal mapper")
	}
	leaf := tc.Certificates[0].Certificate[0]
	block, _ := pem.Decode(validated)
	if block == nil || !bytes.Equal(leaf, block.Bytes) {
		t.Error("the listener serves a certificate other than the validated one")
	}
}
