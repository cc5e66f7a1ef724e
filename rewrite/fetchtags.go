package rewrite

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// padTag is the tag number FetchTags uses to pad a rewritten section to its
// original length. Clients skip tags they do not know (KIP-482), and a tag
// this high is far from any Kafka will assign to FetchResponse.
const padTag = 16383

// FetchTags rewrites the top-level tagged fields of a flexible Fetch
// response — the KIP-951 NodeEndpoints (tag 0, kmsg FetchResponse.Brokers) —
// WITHOUT changing their length.
//
// Why: a Fetch response is mostly record bytes, and the gateway streams
// them socket to socket (splice) instead of reading them into memory. The
// frame size goes out first, but the endpoints sit at the very end of the
// body, after the records. Keeping the tag section's length fixed lets the
// gateway write the upstream's size, stream the records, and rewrite only the
// small tail.
//
// The rewritten endpoints are padded to the original length with an
// unknown tag. If they are longer than the original (a longer advertised
// host), tag 0 is dropped instead: NodeEndpoints is a hint, and a client
// without it refreshes Metadata on NOT_LEADER, as before KIP-951. Either way
// no upstream address survives. changed=false returns tags itself.
func FetchTags(tags []byte, m Mapper) ([]byte, bool, error) {
	fields, err := parseTags(tags)
	if err != nil {
		return nil, false, err
	}
	i := slices.IndexFunc(fields, func(f tagField) bool { return f.tag == 0 })
	if i < 0 {
		return tags, false, nil
	}
	eps, err := parseEndpoints(fields[i].data)
	if err != nil {
		return nil, false, fmt.Errorf("fetch NodeEndpoints: %w", err)
	}
	if len(eps) == 0 {
		return tags, false, nil
	}
	if m == nil {
		return nil, false, ErrBadMapping
	}
	mapped := eps[:0:0]
	for _, ep := range eps {
		host, port, ok := m.Advertise(Broker, ep.node, ep.host, ep.port)
		if !ok {
			continue // drop the hint; the client refreshes metadata
		}
		ep.host, ep.port = host, port
		mapped = append(mapped, ep)
	}
	others := slices.Delete(slices.Clone(fields), i, i+1)
	candidates := [][]tagField{others}
	if len(mapped) > 0 {
		with := slices.Clone(fields)
		with[i].data = appendEndpoints(nil, mapped)
		candidates = [][]tagField{with, others}
	}
	for _, c := range candidates {
		if out, ok := encodeTagsLen(c, len(tags)); ok {
			return out, true, nil
		}
	}
	// Dropping tag 0 frees at least the bytes of one endpoint, so this is
	// unreachable for any section that had one; fail closed all the same.
	return nil, false, fmt.Errorf("%w: cannot fit rewritten Fetch endpoints in %d bytes", ErrMalformed, len(tags))
}

type tagField struct {
	tag  uint64
	data []byte
}

func parseTags(b []byte) ([]tagField, error) {
	count, off, err := readUvarint(b, 0)
	if err != nil {
		return nil, err
	}
	if count > uint64(len(b)) {
		return nil, fmt.Errorf("%w: %d tags in %d bytes", ErrMalformed, count, len(b))
	}
	fields := make([]tagField, 0, count)
	for range count {
		var tag, size uint64
		if tag, off, err = readUvarint(b, off); err != nil {
			return nil, err
		}
		if size, off, err = readUvarint(b, off); err != nil {
			return nil, err
		}
		if size > uint64(len(b)-off) {
			return nil, fmt.Errorf("%w: tag %d of %d bytes, %d left", ErrMalformed, tag, size, len(b)-off)
		}
		fields = append(fields, tagField{tag, b[off : off+int(size)]})
		off += int(size)
	}
	if off != len(b) {
		return nil, fmt.Errorf("%w: %d bytes after the tagged fields", ErrMalformed, len(b)-off)
	}
	return fields, nil
}

// encodeTagsLen encodes fields, padded with an unknown tag so that the
// result is exactly want bytes; ok=false if that is impossible.
func encodeTagsLen(fields []tagField, want int) ([]byte, bool) {
	out := appendTags(nil, fields)
	if len(out) == want {
		return out, true
	}
	if len(out) > want {
		return nil, false
	}
	pad := uint64(padTag)
	for _, f := range fields {
		pad = max(pad, f.tag+1) // tags must stay in ascending order
	}
	gap := want - len(out)
	// The pad costs its tag and size varints plus its data, and may lengthen
	// the count varint; try the few data sizes that can land exactly.
	for d := gap; d >= 0 && d >= gap-12; d-- {
		padded := appendTags(nil, append(slices.Clone(fields), tagField{pad, make([]byte, d)}))
		if len(padded) == want {
			return padded, true
		}
	}
	return nil, false
}

func appendTags(dst []byte, fields []tagField) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(fields)))
	for _, f := range fields {
		dst = binary.AppendUvarint(dst, f.tag)
		dst = binary.AppendUvarint(dst, uint64(len(f.data)))
		dst = append(dst, f.data...)
	}
	return dst
}

// fetchEndpoint is one entry of Fetch's NodeEndpoints (FetchResponse.json,
// versions 16+: NodeId int32, Host compact string, Port int32, Rack compact
// nullable string, tagged fields).
type fetchEndpoint struct {
	node int32
	host string
	port int32
	rack []byte // the encoded rack field, kept as is
	tags []byte // the entry's encoded tagged fields, kept as is
}

func parseEndpoints(b []byte) ([]fetchEndpoint, error) {
	n, off, err := readUvarint(b, 0)
	if err != nil {
		return nil, err
	}
	if n == 0 { // a null array
		return nil, nil
	}
	n--
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: %d endpoints in %d bytes", ErrMalformed, n, len(b))
	}
	eps := make([]fetchEndpoint, 0, n)
	for range n {
		var ep fetchEndpoint
		if off+4 > len(b) {
			return nil, ErrMalformed
		}
		ep.node = int32(binary.BigEndian.Uint32(b[off:]))
		off += 4
		hl, o, err := readUvarint(b, off)
		if err != nil || hl == 0 || hl-1 > uint64(len(b)-o) {
			return nil, fmt.Errorf("%w: endpoint host", ErrMalformed)
		}
		ep.host = string(b[o : o+int(hl-1)])
		off = o + int(hl-1)
		if off+4 > len(b) {
			return nil, ErrMalformed
		}
		ep.port = int32(binary.BigEndian.Uint32(b[off:]))
		off += 4
		start := off
		rl, o, err := readUvarint(b, off)
		if err != nil || (rl > 0 && rl-1 > uint64(len(b)-o)) {
			return nil, fmt.Errorf("%w: endpoint rack", ErrMalformed)
		}
		off = o
		if rl > 0 {
			off += int(rl - 1)
		}
		ep.rack = b[start:off]
		start = off
		tn, err := skipTagSection(b, off)
		if err != nil {
			return nil, err
		}
		off = tn
		ep.tags = b[start:off]
		eps = append(eps, ep)
	}
	if off != len(b) {
		return nil, fmt.Errorf("%w: %d bytes after the endpoints", ErrMalformed, len(b)-off)
	}
	return eps, nil
}

func appendEndpoints(dst []byte, eps []fetchEndpoint) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(eps))+1)
	for _, ep := range eps {
		dst = binary.BigEndian.AppendUint32(dst, uint32(ep.node))
		dst = binary.AppendUvarint(dst, uint64(len(ep.host))+1)
		dst = append(dst, ep.host...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(ep.port))
		dst = append(dst, ep.rack...)
		dst = append(dst, ep.tags...)
	}
	return dst
}

func skipTagSection(b []byte, off int) (int, error) {
	count, off, err := readUvarint(b, off)
	if err != nil {
		return 0, err
	}
	for range count {
		if _, off, err = readUvarint(b, off); err != nil {
			return 0, err
		}
		var size uint64
		if size, off, err = readUvarint(b, off); err != nil {
			return 0, err
		}
		if size > uint64(len(b)-off) {
			return 0, ErrMalformed
		}
		off += int(size)
	}
	return off, nil
}

func readUvarint(b []byte, off int) (uint64, int, error) {
	if off > len(b) {
		return 0, 0, ErrMalformed
	}
	v, n := binary.Uvarint(b[off:])
	if n <= 0 || v > 1<<31 {
		return 0, 0, fmt.Errorf("%w: bad varint", ErrMalformed)
	}
	return v, off + n, nil
}
