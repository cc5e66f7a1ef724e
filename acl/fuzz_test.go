package acl

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode: the ACL file parser never panics, and what it accepts is
// valid and encodes to a file that decodes to the same ACLs. Seeds:
// testdata/*.json.
func FuzzDecode(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.json")
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		bs, err := Decode(data)
		if err != nil {
			return
		}
		for _, b := range bs {
			if err := b.Validate(); err != nil {
				t.Fatalf("decoded an invalid ACL %v: %v", b, err)
			}
		}
		enc := Encode(bs)
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-decode: %v\n%s", err, enc)
		}
		if !bytes.Equal(Encode(again), enc) {
			t.Fatalf("encode is not stable:\n%s\n%s", enc, Encode(again))
		}
	})
}
