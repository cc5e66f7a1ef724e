package console

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recordPrinter returns how consume writes a record: -f json, -f yaml,
// -f FORMAT, or (default) the value and a newline. --format json|yaml
// means -f json|yaml.
func recordPrinter(f, common string) (func(*bufio.Writer, *kgo.Record), error) {
	if f == "" && common != formatText {
		f = common
	}
	switch f {
	case "":
		return func(w *bufio.Writer, r *kgo.Record) { w.Write(r.Value); w.WriteByte('\n') }, nil
	case "yaml":
		// A YAML stream: one document per record, the fields of -f json.
		return func(w *bufio.Writer, r *kgo.Record) {
			b, _ := toYAML(jsonRecordOf(r))
			w.WriteString("---\n")
			w.Write(b)
		}, nil
	case "json":
		return func(w *bufio.Writer, r *kgo.Record) {
			b, _ := json.Marshal(jsonRecordOf(r))
			w.Write(b)
			w.WriteByte('\n')
		}, nil
	}
	return formatPrinter(f)
}

// jsonRecord is one record of `consume -f json`. Keys, values and header
// values that are not valid UTF-8 are given base64-encoded in the *_base64
// field instead.
type jsonRecord struct {
	Topic       string       `json:"topic"`
	Partition   int32        `json:"partition"`
	Offset      int64        `json:"offset"`
	Timestamp   int64        `json:"timestamp"`
	Key         *string      `json:"key"`
	KeyBase64   string       `json:"key_base64,omitempty"`
	Value       *string      `json:"value"`
	ValueBase64 string       `json:"value_base64,omitempty"`
	Headers     []jsonHeader `json:"headers"`
}

type jsonHeader struct {
	Key         string  `json:"key"`
	Value       *string `json:"value"`
	ValueBase64 string  `json:"value_base64,omitempty"`
}

func jsonRecordOf(r *kgo.Record) jsonRecord {
	j := jsonRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(), Headers: []jsonHeader{}}
	j.Key, j.KeyBase64 = textOrBase64(r.Key)
	j.Value, j.ValueBase64 = textOrBase64(r.Value)
	for _, h := range r.Headers {
		jh := jsonHeader{Key: h.Key}
		jh.Value, jh.ValueBase64 = textOrBase64(h.Value)
		j.Headers = append(j.Headers, jh)
	}
	return j
}

func textOrBase64(b []byte) (*string, string) {
	if b == nil {
		return nil, ""
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, ""
	}
	return nil, base64.StdEncoding.EncodeToString(b)
}

// formatPrinter compiles a format string: %t topic, %p partition, %o
// offset, %k key, %v value, %T timestamp (ms), %h headers (k=v,...), %%;
// escapes \n \t \\.
func formatPrinter(f string) (func(*bufio.Writer, *kgo.Record), error) {
	var parts []func(*bufio.Writer, *kgo.Record)
	lit := func(s string) {
		parts = append(parts, func(w *bufio.Writer, _ *kgo.Record) { w.WriteString(s) })
	}
	var buf strings.Builder
	flush := func() {
		if buf.Len() > 0 {
			lit(buf.String())
			buf.Reset()
		}
	}
	for i := 0; i < len(f); i++ {
		ch := f[i]
		if (ch != '%' && ch != '\\') || i+1 == len(f) {
			if ch == '%' || ch == '\\' {
				return nil, usagef("format %q ends in a lone %c", f, ch)
			}
			buf.WriteByte(ch)
			continue
		}
		i++
		if ch == '\\' {
			esc, ok := map[byte]byte{'n': '\n', 't': '\t', '\\': '\\', 'r': '\r'}[f[i]]
			if !ok {
				return nil, usagef("format %q: unknown escape \\%c", f, f[i])
			}
			buf.WriteByte(esc)
			continue
		}
		if f[i] == '%' {
			buf.WriteByte('%')
			continue
		}
		field, ok := formatFields[f[i]]
		if !ok {
			return nil, usagef("format %q: unknown %%%c (use %%t %%p %%o %%k %%v %%T %%h %%%%)", f, f[i])
		}
		flush()
		parts = append(parts, field)
	}
	flush()
	return func(w *bufio.Writer, r *kgo.Record) {
		for _, p := range parts {
			p(w, r)
		}
	}, nil
}

var formatFields = map[byte]func(*bufio.Writer, *kgo.Record){
	't': func(w *bufio.Writer, r *kgo.Record) { w.WriteString(r.Topic) },
	'p': func(w *bufio.Writer, r *kgo.Record) { w.WriteString(strconv.Itoa(int(r.Partition))) },
	'o': func(w *bufio.Writer, r *kgo.Record) { w.WriteString(strconv.FormatInt(r.Offset, 10)) },
	'k': func(w *bufio.Writer, r *kgo.Record) { w.Write(r.Key) },
	'v': func(w *bufio.Writer, r *kgo.Record) { w.Write(r.Value) },
	'T': func(w *bufio.Writer, r *kgo.Record) { w.WriteString(strconv.FormatInt(r.Timestamp.UnixMilli(), 10)) },
	'h': func(w *bufio.Writer, r *kgo.Record) {
		for i, h := range r.Headers {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(h.Key)
			w.WriteByte('=')
			w.Write(h.Value)
		}
	},
}
