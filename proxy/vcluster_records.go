package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tollgate-kafka/tollgate/wire"
)

// Produce and Fetch in a virtual cluster, without decoding them
// (DESIGN.md, principle 1): a Produce request is copied once with its
// topic names (and transactional id) prefixed, its record sets moved as
// they are — one walk over the headers, no allocation per record; a
// Fetch v13+ request names topics by id only, so it is forwarded as it
// is once every id is checked to be the tenant's (one that is not is
// masked in place, same length, and the answer is then decoded to
// unmask it). Fetch before v13 and Produce v13+ take the decoded path
// of their table rows (vcluster_table.go).

var errVCShort = errors.New("request ends inside a field")

// vcProduceFast rewrites a Produce request; ok is false when the
// decoded path must decide (an empty topic name, which it refuses).
func (s *session) vcProduceFast(r *request, n *vcNames) (ok bool, err error) {
	if r.h.Version >= 13 && r.j.whole == nil && vcProduceHeadID(r.h, r.buf, n) {
		// One topic, by id, no transactional id: its id was checked
		// (and masked if foreign) in the read buffer, and the frame goes
		// on as a plain one does, its records spliced.
		r.p.vc = n
		return true, nil
	}
	if err := s.readWholeOnce(r); err != nil {
		return false, err
	}
	if r.h.Version >= 13 {
		// Topic ids only (KIP-516): with no transactional id nothing
		// changes length, so foreign ids are masked in place and the
		// frame goes on as it was read, with no copy.
		inPlace, err := vcProduceIDs(r.h, r.j.whole, n)
		if err != nil {
			return false, badRequest(closeMalformed, "produce request: %w", err)
		}
		if inPlace {
			r.j.forward = r.j.whole
			r.p.vc = n
			return true, nil
		}
	}
	var dst []byte
	if s.local == nil && s.tun == nil {
		// Written upstream by this read loop before the frame is done
		// with (request.release returns it): a pooled buffer, not a
		// fresh zeroed one per Produce.
		r.vcFrame = getFrame(vcProduceCap(len(r.j.whole), n.prefix))
		dst = r.vcFrame.b[:0]
	}
	out, empty, err := vcProduceFrame(dst, r.h, r.j.whole, n)
	if err != nil {
		return false, badRequest(closeMalformed, "produce request: %w", err)
	}
	if empty {
		return false, nil
	}
	r.j.forward = out
	r.p.vc = n
	return true, nil
}

// vcProduceFrame returns the Produce frame (size prefix included) with
// prefix before its transactional id and every topic name; empty is
// true (and out nil) when a topic name is empty.
func vcProduceFrame(dst []byte, h wire.RequestHeader, frame []byte, n *vcNames) (out []byte, empty bool, err error) {
	prefix := n.prefix
	if len(frame) < 4+h.Len {
		return nil, false, errVCShort
	}
	body := frame[4+h.Len:]
	flex := h.Flexible
	w := vcWalk{b: body}
	out = dst[:0]
	if out == nil {
		out = make([]byte, 0, vcProduceCap(len(frame), prefix))
	}
	out = append(out, frame[:4+h.Len]...)
	if h.Version >= 3 { // transactional id, nullable
		s, null, err := w.str(flex)
		if err != nil {
			return nil, false, err
		}
		if null {
			out = w.appendNull(out, flex)
		} else if out, err = appendStr(out, flex, prefix, s); err != nil {
			return nil, false, err
		}
	}
	acks, err := w.take(6) // acks, timeout
	if err != nil {
		return nil, false, err
	}
	out = append(out, acks...)
	nt, raw, err := w.arrayLen(flex)
	if err != nil {
		return nil, false, err
	}
	out = append(out, raw...)
	for range nt {
		if h.Version >= 13 {
			// Topic ids (KIP-516): one that is not the tenant's is masked,
			// as the decoded path's idUp does.
			id, err := w.take(16)
			if err != nil {
				return nil, false, err
			}
			at := len(out)
			out = append(out, id...)
			n.idUp((*[16]byte)(out[at : at+16]))
		} else {
			name, null, err := w.str(flex)
			if err != nil {
				return nil, false, err
			}
			if null || len(name) == 0 {
				return nil, true, nil
			}
			if out, err = appendStr(out, flex, prefix, name); err != nil {
				return nil, false, err
			}
		}
		start := w.off
		if err := w.skipProducePartitions(flex); err != nil {
			return nil, false, err
		}
		out = append(out, body[start:w.off]...)
	}
	out = append(out, body[w.off:]...) // the request's tags
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, false, nil
}

// vcProduceHeadID handles the common Produce v13+ request from the
// start of its frame alone (head: the size prefix and as much of the
// frame as the read buffer holds): with no transactional id and a single
// topic, the topic id is the request's only name, and it lies in the
// head. It masks that id in place if it is not the tenant's and returns
// true; false (nothing changed) for any other request, or when the head
// ends before the id: the whole frame is read and walked instead.
func vcProduceHeadID(h wire.RequestHeader, head []byte, n *vcNames) bool {
	if len(head) < 4+h.Len {
		return false
	}
	w := vcWalk{b: head[4+h.Len:]}
	if _, null, err := w.str(h.Flexible); err != nil || !null { // transactional id
		return false
	}
	if _, err := w.take(6); err != nil { // acks, timeout
		return false
	}
	if nt, _, err := w.arrayLen(h.Flexible); err != nil || nt != 1 {
		return false
	}
	id, err := w.take(16)
	if err != nil {
		return false
	}
	n.idUp((*[16]byte)(id))
	return true
}

// vcProduceIDs masks, in place, every topic id of a Produce v13+ frame
// (size prefix included) that is not the tenant's; inPlace is false, and
// nothing is changed, when the request has a transactional id, which
// grows by the prefix and so needs vcProduceFrame's copy.
func vcProduceIDs(h wire.RequestHeader, frame []byte, n *vcNames) (inPlace bool, err error) {
	if len(frame) < 4+h.Len {
		return false, errVCShort
	}
	flex := h.Flexible
	w := vcWalk{b: frame[4+h.Len:]}
	if _, null, err := w.str(flex); err != nil || !null { // transactional id
		return false, err
	}
	if _, err := w.take(6); err != nil { // acks, timeout
		return false, err
	}
	nt, _, err := w.arrayLen(flex)
	if err != nil {
		return false, err
	}
	// Walk it all before masking anything: a truncated frame is refused
	// as it came.
	ids := make([]int, 0, 1)
	for range nt {
		ids = append(ids, w.off)
		if _, err := w.take(16); err != nil {
			return false, err
		}
		if err := w.skipProducePartitions(flex); err != nil {
			return false, err
		}
	}
	for _, at := range ids {
		n.idUp((*[16]byte)(w.b[at : at+16]))
	}
	return true, nil
}

// skipProducePartitions walks one Produce topic's partitions (index,
// records as they are, tags) and the topic's own tags.
func (w *vcWalk) skipProducePartitions(flex bool) error {
	np, _, err := w.arrayLen(flex)
	if err != nil {
		return err
	}
	for range np {
		if _, err := w.take(4); err != nil { // partition
			return err
		}
		if err := w.skipBytes(flex); err != nil { // records
			return err
		}
		if flex {
			if err := w.skipTags(); err != nil {
				return err
			}
		}
	}
	if flex {
		return w.skipTags()
	}
	return nil
}

// vcFetchFast checks a Fetch v13+ request's topic ids, masking those
// that are not the tenant's in place; ok is true when it is done (the
// answer streams as it is unless an id was masked).
func (s *session) vcFetchFast(r *request, n *vcNames) (ok bool, err error) {
	var frame []byte
	switch {
	case r.j.forward != nil:
		frame = r.j.forward
	case r.j.whole != nil:
		frame = r.j.whole
	case len(r.buf) == 4+r.size:
		frame = r.buf // the whole frame is in the read buffer: mask there
	default:
		if err := s.readWholeOnce(r); err != nil {
			return false, err
		}
		frame = r.j.whole
	}
	if len(frame) < 4 {
		return false, badRequest(closeMalformed, "fetch request: %w", errVCShort)
	}
	// The header of a re-encoded frame may differ in length from the
	// client's (a null client id): parse the one at hand.
	fh, err := wire.ParseRequestHeader(frame[4:])
	if err != nil {
		return false, badRequest(closeMalformed, "fetch request header: %w", err)
	}
	h := fh
	masked, err := vcFetchIDs(h, frame[4+h.Len:], n)
	if err != nil {
		return false, badRequest(closeMalformed, "fetch request: %w", err)
	}
	if masked {
		r.p.vc = n // the answer carries the masked ids: unmask them
		// The masked frame is what goes on, whoever decodes it next
		// (single-port routing prefers a decoded request a stage before
		// kept, which holds the ids as the client sent them).
		if r.j.forward == nil {
			if r.j.whole == nil {
				if err := s.readWholeOnce(r); err != nil { // copies the masked bytes out of the read buffer
					return false, err
				}
			}
			r.j.forward = r.j.whole
		}
	}
	return true, nil
}

// vcFetchIDs walks a Fetch v13+ body and masks every topic id (fetched
// or forgotten) that is not the tenant's; masked says whether any was.
func vcFetchIDs(h wire.RequestHeader, body []byte, n *vcNames) (masked bool, err error) {
	w := vcWalk{b: body}
	fixed := 4 + 4 + 4 + 1 + 4 + 4 // max wait, min bytes, max bytes, isolation, session id, epoch
	if h.Version < 15 {
		fixed += 4 // replica id
	}
	if _, err := w.take(fixed); err != nil {
		return false, err
	}
	check := func() error {
		id, err := w.take(16)
		if err != nil {
			return err
		}
		var v [16]byte
		copy(v[:], id)
		if v != ([16]byte{}) && !n.ids.owns(v, n.prefix) {
			for i := range id {
				id[i] ^= n.mask[i]
			}
			masked = true
		}
		return nil
	}
	nt, _, err := w.arrayLen(true)
	if err != nil {
		return false, err
	}
	for range nt {
		if err := check(); err != nil {
			return false, err
		}
		np, _, err := w.arrayLen(true)
		if err != nil {
			return false, err
		}
		for range np {
			if _, err := w.take(32); err != nil { // partition, epoch, offset, last epoch, log start, max bytes
				return false, err
			}
			if err := w.skipTags(); err != nil {
				return false, err
			}
		}
		if err := w.skipTags(); err != nil {
			return false, err
		}
	}
	nf, _, err := w.arrayLen(true)
	if err != nil {
		return false, err
	}
	for range nf {
		if err := check(); err != nil {
			return false, err
		}
		np, _, err := w.arrayLen(true)
		if err != nil {
			return false, err
		}
		if _, err := w.take(4 * np); err != nil {
			return false, err
		}
		if err := w.skipTags(); err != nil {
			return false, err
		}
	}
	return masked, nil
}

// vcWalk reads a request body field by field.
type vcWalk struct {
	b   []byte
	off int
}

func (w *vcWalk) take(n int) ([]byte, error) {
	if n < 0 || len(w.b)-w.off < n {
		return nil, errVCShort
	}
	b := w.b[w.off : w.off+n]
	w.off += n
	return b, nil
}

func (w *vcWalk) uvarint() (uint64, error) {
	v, n := binary.Uvarint(w.b[w.off:])
	if n <= 0 {
		return 0, errVCShort
	}
	w.off += n
	return v, nil
}

// arrayLen reads an array length (compact when flex) and returns the
// bytes it took; a null array is 0.
func (w *vcWalk) arrayLen(flex bool) (int, []byte, error) {
	start := w.off
	var n int
	if flex {
		v, err := w.uvarint()
		if err != nil {
			return 0, nil, err
		}
		if v > 0 {
			n = int(v - 1)
		}
	} else {
		b, err := w.take(4)
		if err != nil {
			return 0, nil, err
		}
		if v := int32(binary.BigEndian.Uint32(b)); v > 0 {
			n = int(v)
		}
	}
	if n > len(w.b) { // every element is at least one byte
		return 0, nil, fmt.Errorf("array of %d elements in %d bytes", n, len(w.b))
	}
	return n, w.b[start:w.off], nil
}

// str reads a (nullable) string.
func (w *vcWalk) str(flex bool) (s []byte, null bool, err error) {
	var n int
	if flex {
		v, err := w.uvarint()
		if err != nil {
			return nil, false, err
		}
		if v == 0 {
			return nil, true, nil
		}
		n = int(v - 1)
	} else {
		b, err := w.take(2)
		if err != nil {
			return nil, false, err
		}
		v := int16(binary.BigEndian.Uint16(b))
		if v < 0 {
			return nil, true, nil
		}
		n = int(v)
	}
	s, err = w.take(n)
	return s, false, err
}

func (w *vcWalk) appendNull(out []byte, flex bool) []byte {
	if flex {
		return append(out, 0)
	}
	return append(out, 0xff, 0xff)
}

// skipBytes skips (nullable) bytes.
func (w *vcWalk) skipBytes(flex bool) error {
	var n int
	if flex {
		v, err := w.uvarint()
		if err != nil {
			return err
		}
		if v == 0 {
			return nil
		}
		n = int(v - 1)
	} else {
		b, err := w.take(4)
		if err != nil {
			return err
		}
		v := int32(binary.BigEndian.Uint32(b))
		if v < 0 {
			return nil
		}
		n = int(v)
	}
	_, err := w.take(n)
	return err
}

func (w *vcWalk) skipTags() error {
	n, err := wire.SkipTags(w.b[w.off:])
	if err != nil {
		return err
	}
	w.off += n
	return nil
}

// appendStr appends prefix+s as a (compact when flex) string.
func appendStr(out []byte, flex bool, prefix string, s []byte) ([]byte, error) {
	n := len(prefix) + len(s)
	if n > 32767 {
		return nil, fmt.Errorf("a name of %d bytes with the prefix is longer than a Kafka string", n)
	}
	if flex {
		out = binary.AppendUvarint(out, uint64(n+1))
	} else {
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	}
	out = append(out, prefix...)
	return append(out, s...), nil
}

// vcProduceCap is the room a rewritten Produce frame is given: a few
// topics' prefixes (more grow it).
func vcProduceCap(frame int, prefix string) int { return frame + len(prefix)*8 + 16 }
