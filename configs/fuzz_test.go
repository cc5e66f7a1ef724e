package configs

import (
	"errors"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse. Invariants:
//   - Parse never panics;
//   - it returns either a config or an error, never both or neither;
//   - every error is a *FieldError naming the source, with a non-negative
//     position;
//   - an accepted config's effective YAML parses back to the same
//     effective YAML.
//
// Seeds are in testdata/fuzz/FuzzParse (the example files and error cases).
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml")
		if err != nil {
			if c != nil {
				t.Fatal("Parse returned a config and an error")
			}
			for _, e := range unjoin(err) {
				var fe *FieldError
				if !errors.As(e, &fe) {
					t.Fatalf("error %T is not a *FieldError: %v", e, e)
				}
				if fe.Source != "fuzz.yaml" || fe.Line < 0 || fe.Column < 0 || fe.Msg == "" {
					t.Fatalf("malformed error %+v", fe)
				}
			}
			return
		}
		if c == nil {
			t.Fatal("Parse returned neither config nor error")
		}
		out, err := c.YAML()
		if err != nil {
			t.Fatalf("YAML: %v", err)
		}
		c2, err := Parse(out, "effective.yaml")
		if err != nil {
			t.Fatalf("effective YAML does not parse: %v\n%s", err, out)
		}
		out2, err := c2.YAML()
		if err != nil || string(out2) != string(out) {
			t.Fatalf("effective YAML changed on a round trip (%v):\n%s\n---\n%s", err, out, out2)
		}
	})
}
