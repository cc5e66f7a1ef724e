package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-kafka/tollgate/configs"
)

// TestReconfigure: a running trail takes a new level, filter and file
// max_size (the file rotates at the new size from the next write), and
// refuses to be turned off, which needs a restart.
func TestReconfigure(t *testing.T) {
	dir := t.TempDir()
	cfg := auditCfg(configs.AuditSummary, configs.AuditStrict, 1000)
	cfg.Sink = configs.AuditSink{File: filepath.Join(dir, "audit.jsonl"), MaxSize: 8 * configs.MiB, Keep: 5}
	h := &countHooks{}
	tr, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	next := cfg
	next.Level = configs.AuditFull
	next.Sink.MaxSize = configs.MiB
	next.Filter = configs.AuditFilter{API: []string{"Produce"}}
	if err := tr.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	if tr.Level() != Full {
		t.Errorf("level %v, want full", tr.Level())
	}
	if tr.Wants("default", 1, "c") {
		t.Error("the new filter (Produce only) wants a Fetch")
	}
	// About 2.5 MiB: two rotations at the new 1 MiB, none at the old 8.
	rec := reqRecord(0)
	rec.ClientID = strings.Repeat("x", 700)
	n := 2_500_000 / len(rec.AppendJSON(nil, true))
	for i := range n {
		r := *rec
		r.Correlation = int32(i)
		if err := tr.Log(&r); err != nil {
			t.Fatal(err)
		}
	}
	off := next
	off.Level = configs.AuditOff
	if err := tr.Reconfigure(off); !errors.Is(err, ErrNeedsRestart) {
		t.Errorf("turning the trail off: %v, want ErrNeedsRestart", err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if h.written.Load() != int64(n) {
		t.Fatalf("written %d of %d", h.written.Load(), n)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "audit*.jsonl"))
	if len(files) < 3 {
		t.Fatalf("files %q: want the file rotated at the new max_size", files)
	}
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > int64(configs.MiB) {
			t.Errorf("%s is %d bytes, above the new max_size", f, fi.Size())
		}
	}
}
