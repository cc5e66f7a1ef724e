package console

import (
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// offsetKind is what an offset specification is relative to.
type offsetKind int

const (
	offStart    offsetKind = iota // "start": the log start offset
	offEnd                        // "end": the high watermark (or LSO with read_committed)
	offAbsolute                   // "N"
	offAfter                      // "+N": consume: N after start; seek: N after the committed offset
	offBefore                     // "-N": consume: N before end; seek: N before the committed offset
	offTime                       // "@T": the first offset at or after time T
	offTrimKeep                   // trim "-N": keep the last N records (end - N)
)

// OffsetSpec is a parsed start position: start, end, N, +N, -N or
// @timestamp (milliseconds since the epoch, or RFC 3339).
type OffsetSpec struct {
	kind  offsetKind
	n     int64 // offAbsolute, offAfter, offBefore
	milli int64 // offTime
}

// parseOffset parses an offset specification; the error says what is
// accepted.
func parseOffset(s string) (OffsetSpec, error) {
	bad := func() (OffsetSpec, error) {
		return OffsetSpec{}, usagef("offset %q: want start, end, N, +N, -N or @timestamp (ms since the epoch or RFC 3339)", s)
	}
	switch s {
	case "start", "beginning", "earliest":
		return OffsetSpec{kind: offStart}, nil
	case "end", "latest":
		return OffsetSpec{kind: offEnd}, nil
	case "":
		return bad()
	}
	if ts, ok := strings.CutPrefix(s, "@"); ok {
		ms, err := parseTime(ts)
		if err != nil {
			return bad()
		}
		return OffsetSpec{kind: offTime, milli: ms}, nil
	}
	kind := offAbsolute
	digits := s
	switch s[0] {
	case '+':
		kind, digits = offAfter, s[1:]
	case '-':
		kind, digits = offBefore, s[1:]
	}
	if digits == "" || digits[0] == '+' || digits[0] == '-' {
		return bad()
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 {
		return bad()
	}
	return OffsetSpec{kind: kind, n: n}, nil
}

// parseTime accepts milliseconds since the epoch or an RFC 3339 time.
func parseTime(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, err
	}
	return t.UnixMilli(), nil
}

// kgoOffset is the consumer's start position for the spec: +N counts
// from the log start, -N back from the end.
func (o OffsetSpec) kgoOffset() kgo.Offset {
	switch o.kind {
	case offStart:
		return kgo.NewOffset().AtStart()
	case offEnd:
		return kgo.NewOffset().AtEnd()
	case offAfter:
		return kgo.NewOffset().AtStart().Relative(o.n)
	case offBefore:
		return kgo.NewOffset().AtEnd().Relative(-o.n)
	case offTime:
		return kgo.NewOffset().AfterMilli(o.milli)
	}
	return kgo.NewOffset().At(o.n)
}

// resolve computes a concrete offset for one partition, for group seek:
// +N and -N shift the committed offset; the result is clamped to
// [start, end]. atTime is the ListOffsets answer for the spec's time (-1
// when none is at or after it: the end).
func (o OffsetSpec) resolve(committed, start, end, atTime int64) int64 {
	var to int64
	switch o.kind {
	case offStart:
		to = start
	case offEnd:
		to = end
	case offAbsolute:
		to = o.n
	case offAfter:
		to = committed + o.n
	case offBefore:
		to = committed - o.n
	case offTime:
		to = atTime
		if to < 0 {
			to = end
		}
	case offTrimKeep:
		to = end - o.n
	}
	return max(start, min(to, end))
}
