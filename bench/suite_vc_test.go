package bench

import (
	"testing"

	"github.com/tollgate-kafka/tollgate/configs"
)

// TestVCSuiteConfig: the vcluster variant's file puts the bench listener
// in a virtual cluster with the suite's prefix; the plain one has none.
func TestVCSuiteConfig(t *testing.T) {
	vs, err := suiteVariants(SuiteVC)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		cfg, err := configs.Parse([]byte(v.configYAML([]string{"127.0.0.1:1", "127.0.0.1:2"}, "")), v.name+".yaml")
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		n := len(cfg.VirtualClusters)
		switch {
		case v.vcPrefix == "" && n != 0:
			t.Errorf("%s: %d virtual clusters", v.name, n)
		case v.vcPrefix != "" && (n != 1 || cfg.VirtualClusters[0].Prefix != vcPrefix || cfg.VirtualClusters[0].Match.Listener != "bench"):
			t.Errorf("%s: virtual clusters %+v", v.name, cfg.VirtualClusters)
		}
	}
}
