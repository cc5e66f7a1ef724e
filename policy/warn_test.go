package policy

import (
	"strings"
	"testing"

	"github.com/tollgate-kafka/tollgate/configs"
)

func TestWarnings(t *testing.T) {
	src := `policy:
  rules:
    - name: deny-admin
      match: { api: [admin] }
      action: deny
    - name: allow-create
      match: { api: [CreateTopics], client_id: ops }
      action: allow
    - name: deny-prefix
      match: { topic: { prefix: a. } }
      action: deny
    - name: deny-narrower
      match: { topic: { prefix: a.b. }, api: [Produce] }
      action: deny
    - name: reachable
      match: { topic: { regex: "a.*" } }
      action: allow
`
	c, err := configs.Parse([]byte(src), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, warns, err := Compile(c.Policy)
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 2 {
		t.Fatalf("warnings %v; want allow-create and deny-narrower", warns)
	}
	if warns[0].Rule != "allow-create" || warns[0].Line != 6 || !strings.Contains(warns[0].Msg, "deny-admin (line 3)") {
		t.Errorf("warning 0 = %+v", warns[0])
	}
	if warns[1].Rule != "deny-narrower" || warns[1].Line != 12 {
		t.Errorf("warning 1 = %+v", warns[1])
	}
	if s := warns[0].String(); !strings.HasPrefix(s, "w.yaml:6: policy rule allow-create: unreachable") {
		t.Errorf("String() = %q", s)
	}
}
