package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Errors a caller branches on. Every error from this package wraps one of them.
var (
	// ErrFrameTooLarge means the size prefix exceeds the configured maximum.
	ErrFrameTooLarge = errors.New("frame larger than the maximum allowed")
	// ErrBadSize means the size prefix is negative or too small to hold a header.
	ErrBadSize = errors.New("invalid frame size")
	// ErrTruncated means a header ended before all of its fields.
	ErrTruncated = errors.New("truncated header")
	// ErrNotKafka means the first bytes are another protocol (HTTP, TLS).
	ErrNotKafka = errors.New("not the Kafka protocol")
)

// RequestHeaderMin is the smallest request header: key, version, correlation
// id and a null client id (2+2+4+2 bytes).
const RequestHeaderMin = 10

// CheckSize validates a 4-byte size prefix against max before anything is
// allocated. It names the likely cause when the bytes are the start of an
// HTTP request or a TLS record rather than a Kafka size.
func CheckSize(prefix [4]byte, max int32) (int32, error) {
	if p := sniffProtocol(prefix); p != "" {
		return 0, fmt.Errorf("%w: the first bytes look like %s", ErrNotKafka, p)
	}
	n := int32(binary.BigEndian.Uint32(prefix[:]))
	switch {
	case n < 0:
		return 0, fmt.Errorf("%w: %d", ErrBadSize, n)
	case n > max:
		return 0, fmt.Errorf("%w: %d bytes > %d", ErrFrameTooLarge, n, max)
	}
	return n, nil
}

// sniffProtocol recognises the protocols most often sent to a Kafka port by
// mistake, from the four bytes that would be a Kafka frame size.
func sniffProtocol(b [4]byte) string {
	switch string(b[:]) {
	case "GET ", "POST", "PUT ", "HEAD", "DELE", "OPTI", "PATC", "CONN", "PRI ", "HTTP":
		return "an HTTP request (is this an HTTP client pointed at a Kafka port?)"
	}
	// A TLS record: content type 22 (handshake) or 21 (alert), then version 3.x.
	if (b[0] == 0x16 || b[0] == 0x15) && b[1] == 0x03 && b[2] <= 0x04 {
		return "a TLS handshake (is the client using TLS against a plaintext listener?)"
	}
	return ""
}

// RequestHeader is the prefix of a request: the header fields the gateway
// reads without decoding the body.
type RequestHeader struct {
	Key         int16
	Version     int16
	Correlation int32
	// ClientID aliases the frame; ClientIDNull is set for a null client id.
	ClientID     []byte
	ClientIDNull bool
	// Flexible reports a v2 header (the request version is flexible). It
	// is false for keys this build does not know.
	Flexible bool
	// Known reports that kmsg knows the key and version, so the body can be
	// decoded.
	Known bool
	// Len is the number of header bytes, including the tagged fields of a
	// v2 header; the body starts at frame[Len:].
	Len int
}

// ParseRequestHeader parses the request header at the start of frame (the
// bytes after the size prefix). It never allocates.
//
// The client id is a classic int16-length nullable string even in header v2
// (RequestHeader.json: "flexibleVersions": "none"); the header's tagged
// fields follow it.
func ParseRequestHeader(frame []byte) (RequestHeader, error) {
	var h RequestHeader
	if len(frame) < RequestHeaderMin {
		return h, fmt.Errorf("%w: %d bytes, need at least %d", ErrTruncated, len(frame), RequestHeaderMin)
	}
	h.Key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.Correlation = int32(binary.BigEndian.Uint32(frame[4:]))
	idLen := int16(binary.BigEndian.Uint16(frame[8:]))
	off := RequestHeaderMin
	switch {
	case idLen == -1:
		h.ClientIDNull = true
	case idLen < -1:
		return h, fmt.Errorf("%w: client id length %d", ErrTruncated, idLen)
	default:
		if len(frame) < off+int(idLen) {
			return h, fmt.Errorf("%w: client id of %d bytes, %d left", ErrTruncated, idLen, len(frame)-off)
		}
		h.ClientID = frame[off : off+int(idLen)]
		off += int(idLen)
	}
	h.Known = KnownVersion(h.Key, h.Version)
	h.Flexible = IsFlexible(h.Key, h.Version)
	if h.Flexible {
		n, err := skipTags(frame[off:])
		if err != nil {
			return h, err
		}
		off += n
	}
	h.Len = off
	return h, nil
}

// skipTags skips a tagged-field section and returns its length.
func skipTags(b []byte) (int, error) {
	count, off, err := uvarint(b, 0)
	if err != nil {
		return 0, err
	}
	for i := uint64(0); i < count; i++ {
		if _, off, err = uvarint(b, off); err != nil { // tag
			return 0, err
		}
		var size uint64
		if size, off, err = uvarint(b, off); err != nil {
			return 0, err
		}
		if size > uint64(len(b)-off) {
			return 0, fmt.Errorf("%w: tagged field of %d bytes, %d left", ErrTruncated, size, len(b)-off)
		}
		off += int(size)
	}
	return off, nil
}

func uvarint(b []byte, off int) (uint64, int, error) {
	v, n := binary.Uvarint(b[off:])
	if n <= 0 || v > 1<<31 {
		return 0, 0, fmt.Errorf("%w: bad varint in tagged fields", ErrTruncated)
	}
	return v, off + n, nil
}

// flexibleFrom[key] is the first flexible version of each key kmsg knows,
// or -1 for keys that are never flexible. maxVersion[key] is kmsg's max.
var (
	flexibleFrom [kmsg.MaxKey + 1]int16
	maxVersion   [kmsg.MaxKey + 1]int16
)

func init() {
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		flexibleFrom[k], maxVersion[k] = -1, -1
		req := kmsg.RequestForKey(k)
		if req == nil {
			continue
		}
		maxVersion[k] = req.MaxVersion()
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			if req.IsFlexible() {
				flexibleFrom[k] = v
				break
			}
		}
	}
}

// KnownVersion reports whether kmsg can decode key at version.
func KnownVersion(key, version int16) bool {
	return key >= 0 && int(key) < len(maxVersion) && version >= 0 && version <= maxVersion[key]
}

// MaxVersion is kmsg's highest version for key, or -1 for unknown keys.
func MaxVersion(key int16) int16 {
	if key < 0 || int(key) >= len(maxVersion) {
		return -1
	}
	return maxVersion[key]
}

// IsFlexible reports whether key at version uses flexible encoding (and so a
// v2 request header). Flexibility is "vN and up" for every key (KIP-482), so
// the answer holds for versions above kmsg's max as well.
func IsFlexible(key, version int16) bool {
	if key < 0 || int(key) >= len(flexibleFrom) {
		return false
	}
	f := flexibleFrom[key]
	return f >= 0 && version >= f
}

// ResponseHeaderLen is the response header length for key at version: the
// correlation id, plus one empty tag byte for flexible responses. ApiVersions
// (18) always uses header v0 so that a client can read an UNSUPPORTED_VERSION
// error at a fixed offset (KIP-511).
func ResponseHeaderLen(key, version int16) int {
	if key != 18 && IsFlexible(key, version) {
		return 5
	}
	return 4
}

// AppendResponseHeader appends a response frame's size prefix and header
// for a body of bodyLen bytes.
func AppendResponseHeader(dst []byte, key, version int16, corr int32, bodyLen int) []byte {
	hl := ResponseHeaderLen(key, version)
	dst = binary.BigEndian.AppendUint32(dst, uint32(hl+bodyLen))
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if hl == 5 {
		dst = append(dst, 0)
	}
	return dst
}

// SkipTags returns the length of the tagged-field section at the start of b
// (the uvarint count and every tag), for callers that must step over the
// tags of a v1 response header or a v2 request header.
func SkipTags(b []byte) (int, error) { return skipTags(b) }
