package configs

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// Size is a byte count. In YAML it is written either as a plain integer
// (bytes) or as a number with a unit: B, KiB, MiB, GiB, TiB (powers of
// 1024) or KB, MB, GB, TB (powers of 1000). Units are case-insensitive, a
// space may separate number and unit, and a fraction is allowed when the
// result is a whole number of bytes ("1.5GiB"). A bare "K", "M" or "G" is
// rejected because it is ambiguous between the two families.
type Size int64

// Byte size units.
const (
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
	TiB Size = 1 << 40
)

var sizeUnits = map[string]int64{
	"":    1,
	"b":   1,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
	"tib": 1 << 40,
	"kb":  1e3,
	"mb":  1e6,
	"gb":  1e9,
	"tb":  1e12,
}

// ParseSize parses a size such as "512KiB", "100MiB", "10MB" or "1048576".
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, fmt.Errorf("%q is not a size: want bytes or a number with a unit such as 512KiB, 100MiB or 10MB", s)
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		switch unit {
		case "k", "m", "g", "t", "ki", "mi", "gi", "ti":
			return 0, fmt.Errorf("%q has an ambiguous unit: write KiB/MiB/GiB (powers of 1024) or KB/MB/GB (powers of 1000)", s)
		}
		return 0, fmt.Errorf("%q has an unknown unit %q: want B, KiB, MiB, GiB, TiB, KB, MB, GB or TB", s, t[i:])
	}
	if strings.Contains(num, ".") {
		f, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a size: bad number %q", s, num)
		}
		v := f * float64(mult)
		// float64 holds integers exactly up to 2^53, far beyond any
		// sensible size, so a non-integral product is a real fraction.
		if v != math.Trunc(v) {
			return 0, fmt.Errorf("%q is not a whole number of bytes", s)
		}
		if v >= math.MaxInt64 {
			return 0, fmt.Errorf("%q is too large", s)
		}
		return Size(v), nil
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is too large", s)
	}
	if n != 0 && n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return Size(n * mult), nil
}

// String formats the size with the unit that gives the smallest whole
// number, preferring the 1024 family on a tie: 104857600 is "100MiB",
// 10000000 is "10MB", 10^12 is "1TB" and 1023 is "1023".
func (s Size) String() string {
	if s <= 0 {
		return strconv.FormatInt(int64(s), 10)
	}
	best, unit := int64(s), ""
	for _, u := range []struct {
		n    int64
		name string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}, {1e12, "TB"}, {1e9, "GB"}, {1e6, "MB"}, {1e3, "KB"}} {
		if q := int64(s) / u.n; int64(s)%u.n == 0 && q < best {
			best, unit = q, u.name
		}
	}
	return strconv.FormatInt(best, 10) + unit
}

// UnmarshalYAML accepts an integer number of bytes or a size string.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	v, err := decodeSize(n)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalYAML writes the form String returns, as an integer when it has
// no unit.
func (s Size) MarshalYAML() (any, error) {
	str := s.String()
	if i, err := strconv.ParseInt(str, 10, 64); err == nil {
		return i, nil
	}
	return str, nil
}

func decodeSize(n *yaml.Node) (Size, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("want a size such as 512KiB or 100MiB, got a %s", kindName(n))
	}
	switch n.ShortTag() {
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			return 0, fmt.Errorf("%q is not a size: %s", n.Value, errText(err))
		}
		if i < 0 {
			return 0, fmt.Errorf("size %d is negative", i)
		}
		return Size(i), nil
	case "!!str":
		return ParseSize(n.Value)
	}
	return 0, fmt.Errorf("%q is not a size: want bytes or a number with a unit such as 512KiB, 100MiB or 10MB", n.Value)
}

// Duration is a time.Duration written in YAML as a Go duration string:
// "250ms", "30s", "10m", "1h30m". A plain number is rejected because its
// unit would be a guess (Kafka uses ms, most tools seconds).
type Duration time.Duration

// ParseDuration parses a Go duration string ("250ms", "10m").
func ParseDuration(s string) (Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: want a number with a unit such as 250ms, 30s, 10m or 1h", s)
	}
	return Duration(d), nil
}

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats the duration as time.Duration does, without the zero
// trailing units: "10m" rather than "10m0s", "1h" rather than "1h0m0s".
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// UnmarshalYAML accepts a duration string and rejects plain numbers with a
// hint about units.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := decodeDuration(n)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalYAML writes the String form.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

func decodeDuration(n *yaml.Node) (Duration, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("want a duration such as 30s or 10m, got a %s", kindName(n))
	}
	switch n.ShortTag() {
	case "!!int", "!!float":
		return 0, fmt.Errorf("%s has no unit: write a duration such as %ss or %sms", n.Value, n.Value, n.Value)
	case "!!str":
		return ParseDuration(n.Value)
	}
	return 0, fmt.Errorf("%q is not a duration: want a number with a unit such as 250ms, 30s, 10m or 1h", n.Value)
}

// errText strips the "yaml: unmarshal errors:" wrapper and the "line N:"
// prefix from an error the yaml package returned for a single scalar, whose
// position the caller already reports.
func errText(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg := te.Errors[0]
		if strings.HasPrefix(msg, "line ") {
			if i := strings.Index(msg, ": "); i >= 0 {
				msg = msg[i+2:]
			}
		}
		return msg
	}
	return err.Error()
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!int":
			return "integer"
		case "!!float":
			return "number"
		case "!!bool":
			return "boolean"
		case "!!str":
			return "string"
		}
		return "scalar " + n.ShortTag()
	case yaml.AliasNode:
		return "alias"
	case yaml.DocumentNode:
		return "document"
	}
	return "node"
}
