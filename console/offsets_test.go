package console

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestParseOffset(t *testing.T) {
	good := map[string]OffsetSpec{
		"start": {kind: offStart}, "end": {kind: offEnd}, "42": {kind: offAbsolute, n: 42},
		"+5": {kind: offAfter, n: 5}, "-5": {kind: offBefore, n: 5}, "@1700000000000": {kind: offTime, milli: 1700000000000},
		"@2026-12-01T00:00:00Z": {kind: offTime, milli: 1796083200000},
	}
	for in, want := range good {
		got, err := parseOffset(in)
		if err != nil || got != want {
			t.Errorf("parseOffset(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "+", "-", "+-1", "--1", "1.5", "@", "@soon", "99999999999999999999", "start ", "0x10"} {
		if _, err := parseOffset(in); err == nil || exitCode(err) != ExitUsage {
			t.Errorf("parseOffset(%q) accepted or not a usage error: %v", in, err)
		}
	}
}

func TestResolve(t *testing.T) {
	// committed 50, log [10, 100), @time at 70
	cases := map[string]int64{"start": 10, "end": 100, "5": 10, "500": 100, "+20": 70, "-45": 10, "-5": 45, "@1": 70}
	for in, want := range cases {
		o, _ := parseOffset(in)
		if got := o.resolve(50, 10, 100, 70); got != want {
			t.Errorf("resolve(%q) = %d, want %d", in, got, want)
		}
	}
	if got := startOffset(OffsetSpec{kind: offBefore, n: 3}, 10, 100, -1); got != 97 {
		t.Errorf("consume -3 starts at %d, want 97", got)
	}
	if got := startOffset(OffsetSpec{kind: offAfter, n: 3}, 10, 100, -1); got != 13 {
		t.Errorf("consume +3 starts at %d, want 13", got)
	}
}

// FuzzParseOffset: any input either parses to a spec whose resolution
// stays inside the log, or is a usage error; nothing panics.
func FuzzParseOffset(f *testing.F) {
	for _, s := range []string{"start", "end", "0", "+1", "-1", "@0", "@2026-01-01T00:00:00Z", "+-1", "@"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := parseOffset(s)
		if err != nil {
			if exitCode(err) != ExitUsage {
				t.Fatalf("%q: %v is not a usage error", s, err)
			}
			return
		}
		if got := o.resolve(5, 3, 9, -1); got < 3 || got > 9 {
			t.Fatalf("%q resolved to %d outside [3, 9]", s, got)
		}
	})
}

// FuzzFormat: any -f format string either compiles and prints a record
// without panicking, or is a usage error.
func FuzzFormat(f *testing.F) {
	for _, s := range []string{"%v\\n", "%t %p %o %k=%v %T %h%%", "\\t%v", "%", "\\", "%q", "\\x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := formatPrinter(s)
		if err != nil {
			if exitCode(err) != ExitUsage {
				t.Fatalf("%q: %v is not a usage error", s, err)
			}
			return
		}
		var b bytes.Buffer
		w := bufio.NewWriter(&b)
		p(w, &kgo.Record{Topic: "t", Key: []byte("k"), Value: []byte("v"), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("1")}}})
		w.Flush()
	})
}

func TestFormatPrinter(t *testing.T) {
	p, err := formatPrinter(`%t/%p@%o %k=%v [%h] 100%%\n`)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	p(w, &kgo.Record{Topic: "orders", Partition: 2, Offset: 7, Key: []byte("k"), Value: []byte("v"),
		Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}}})
	w.Flush()
	if got := b.String(); got != "orders/2@7 k=v [a=1,b=2] 100%\n" {
		t.Errorf("format: %q", got)
	}
}
