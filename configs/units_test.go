package configs

import (
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

func TestParseSize(t *testing.T) {
	ok := []struct {
		in   string
		want Size
	}{
		{"0", 0},
		{"1048576", 1 << 20},
		{"512KiB", 512 << 10},
		{"100MiB", 100 << 20},
		{"1GiB", 1 << 30},
		{"2TiB", 2 << 40},
		{"10MB", 10_000_000},
		{"1kb", 1000},
		{"1 GB", 1_000_000_000},
		{" 7B ", 7},
		{"1.5GiB", 3 << 29},
		{"0.5KiB", 512},
		{"100mib", 100 << 20},
	}
	for _, c := range ok {
		got, err := ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"", "not a size"},
		{"abc", "not a size"},
		{"-1", "not a size"},
		{"1k", "ambiguous unit"},
		{"5M", "ambiguous unit"},
		{"12XB", `unknown unit "XB"`},
		{"1.3B", "not a whole number"},
		{"1.2.3MiB", "bad number"},
		{"99999999999TiB", "too large"},
		{"99999999999999999999", "too large"},
		{"1e6", "unknown unit"},
	}
	for _, c := range bad {
		_, err := ParseSize(c.in)
		if err == nil || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), c.in) {
			t.Errorf("ParseSize(%q) error = %v; want one naming the value and containing %q", c.in, err, c.msg)
		}
	}
}

func TestSizeStringRoundTrip(t *testing.T) {
	for _, c := range []struct {
		in   Size
		want string
	}{
		{100 << 20, "100MiB"}, {512 << 10, "512KiB"}, {1 << 30, "1GiB"}, {10_000_000, "10MB"},
		{1000, "1KB"}, {1023, "1023"}, {0, "0"}, {3 << 40, "3TiB"}, {1_000_000_000_000, "1TB"},
	} {
		if got := c.in.String(); got != c.want {
			t.Errorf("Size(%d).String() = %q; want %q", int64(c.in), got, c.want)
		}
		back, err := ParseSize(c.in.String())
		if err != nil || back != c.in {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in.String(), back, err, int64(c.in))
		}
	}
}

func TestDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		str  string
	}{
		{"10m", 10 * time.Minute, "10m"},
		{"250ms", 250 * time.Millisecond, "250ms"},
		{"1h", time.Hour, "1h"},
		{"1h30m", 90 * time.Minute, "1h30m"},
		{"90s", 90 * time.Second, "1m30s"},
		{"2h0m5s", 2*time.Hour + 5*time.Second, "2h0m5s"},
	} {
		d, err := ParseDuration(c.in)
		if err != nil || d.D() != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", c.in, d.D(), err, c.want)
		}
		if d.String() != c.str {
			t.Errorf("Duration(%v).String() = %q; want %q", c.want, d.String(), c.str)
		}
		if back, err := ParseDuration(d.String()); err != nil || back != d {
			t.Errorf("round trip of %q: %v, %v", d.String(), back, err)
		}
	}
	if _, err := ParseDuration("10 minutes"); err == nil || !strings.Contains(err.Error(), `"10 minutes"`) {
		t.Errorf("ParseDuration(10 minutes) error = %v; want one naming the value", err)
	}
}

// The types also work with the yaml package directly (yaml.Unmarshaler).
func TestUnitsYAMLUnmarshal(t *testing.T) {
	var v struct {
		S Size     `yaml:"s"`
		D Duration `yaml:"d"`
	}
	if err := yaml.Unmarshal([]byte("s: 2MiB\nd: 1m\n"), &v); err != nil {
		t.Fatal(err)
	}
	if v.S != 2*MiB || v.D.D() != time.Minute {
		t.Fatalf("got %v %v", v.S, v.D)
	}
	for _, c := range []struct{ in, msg string }{
		{"s: -5\n", "negative"},
		{"s: [1]\n", "got a list"},
		{"s: 1.5\n", "not a size"},
		{"d: 30\n", "30 has no unit"},
		{"d: 1.5\n", "has no unit"},
		{"d: soon\n", `"soon" is not a duration`},
		{"d: true\n", "not a duration"},
	} {
		err := yaml.Unmarshal([]byte(c.in), &v)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Unmarshal(%q) error = %v; want %q", c.in, err, c.msg)
		}
	}
	out, err := yaml.Marshal(struct {
		S Size     `yaml:"s"`
		T Size     `yaml:"t"`
		D Duration `yaml:"d"`
	}{100 * MiB, 1023, Duration(10 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), "s: 100MiB\nt: 1023\nd: 10m\n"; got != want {
		t.Errorf("Marshal = %q; want %q", got, want)
	}
}
