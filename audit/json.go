package audit

import (
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends the record as one line of JSON (without the
// newline). With full false the body-level details (topics, resources,
// group, transactional id, acks, error codes) are left out, so a record
// collected at full detail for a live subscriber is written at summary
// detail to a summary sink.
//
// The encoder is written out by hand rather than with encoding/json: it
// runs once per request on the audit writer, and reflection there costs
// several allocations per record. TestJSONMatchesEncodingJSON keeps the
// two in agreement.
func (r *Record) AppendJSON(b []byte, full bool) []byte {
	b = append(b, `{"time":"`...)
	b = r.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = appendStr(b, "event", r.Event)
	b = appendUint(b, "conn_id", r.ConnID)
	b = appendStr(b, "listener", r.Listener)
	b = appendStr(b, "client_addr", r.ClientAddr)
	b = appendStr(b, "tls_subject", r.TLSSubject)
	b = appendStr(b, "principal", r.Principal)
	b = appendStr(b, "client_id", r.ClientID)
	b = appendStr(b, "software_name", r.SoftwareName)
	b = appendStr(b, "software_version", r.SoftwareVersion)
	if r.IsRequest() {
		b = appendStr(b, "api", r.API)
		b = appendIntAlways(b, "key", int64(r.Key))
		b = appendIntAlways(b, "version", int64(r.Version))
		b = appendIntAlways(b, "correlation", int64(r.Correlation))
	}
	if full {
		b = appendTopics(b, r.Topics)
		if len(r.Resources) > 0 {
			b = append(b, `,"resources":[`...)
			for i, s := range r.Resources {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendQuoted(b, s)
			}
			b = append(b, ']')
		}
		b = appendStr(b, "group", r.Group)
		b = appendStr(b, "transactional_id", r.TransactionalID)
		if r.Acks != nil {
			b = appendIntAlways(b, "acks", int64(*r.Acks))
		}
	}
	b = appendStr(b, "decision", r.Decision)
	b = appendInt(b, "throttle_ms", r.ThrottleMs)
	b = appendStr(b, "rule", r.Rule)
	if full && len(r.ErrorCodes) > 0 {
		b = append(b, `,"error_codes":[`...)
		for i, c := range r.ErrorCodes {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(c), 10)
		}
		b = append(b, ']')
	}
	if r.LatencyMs != 0 && !math.IsNaN(r.LatencyMs) && !math.IsInf(r.LatencyMs, 0) {
		b = append(b, `,"latency_ms":`...)
		b = strconv.AppendFloat(b, r.LatencyMs, 'f', -1, 64)
	}
	b = appendInt(b, "bytes_in", int64(r.BytesIn))
	b = appendInt(b, "bytes_out", int64(r.BytesOut))
	b = appendStr(b, "backend", r.Backend)
	if len(r.UpstreamNodes) > 0 {
		b = append(b, `,"upstream_nodes":[`...)
		for i, n := range r.UpstreamNodes {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(n), 10)
		}
		b = append(b, ']')
	}
	b = appendStr(b, "close_reason", r.CloseReason)
	return append(b, '}')
}

func appendTopics(b []byte, ts []Topic) []byte {
	if len(ts) == 0 {
		return b
	}
	b = append(b, `,"topics":[`...)
	for i, t := range ts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendQuoted(b, t.Name)
		if len(t.Partitions) > 0 {
			b = append(b, `,"partitions":[`...)
			for j, p := range t.Partitions {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"partition":`...)
				b = strconv.AppendInt(b, int64(p.Partition), 10)
				b = appendInt(b, "records", int64(p.Records))
				b = appendInt(b, "bytes", int64(p.Bytes))
				if p.Offset >= 0 {
					b = appendIntAlways(b, "offset", p.Offset)
				}
				b = appendInt(b, "error_code", int64(p.ErrorCode))
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

func appendStr(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendQuoted(b, v)
}

func appendInt(b []byte, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	return appendIntAlways(b, key, v)
}

func appendIntAlways(b []byte, key string, v int64) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

func appendUint(b []byte, key string, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendUint(b, v, 10)
}

const hexDigits = "0123456789abcdef"

// appendQuoted writes s as a JSON string. Client ids and topic names are
// client-controlled: control characters are escaped and invalid UTF-8
// becomes U+FFFD, as encoding/json does, so every line stays valid JSON.
// <, > and & are escaped too, matching encoding/json's default.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		// U+2028 and U+2029 end lines in JavaScript; encoding/json escapes them.
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
