package wire

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Real request frames as kmsg's client formatter writes them (the bytes a
// franz-go client sends), so the parser is checked against the reference
// encoder rather than against itself.
func formatted(req kmsg.Request, clientID *string, corr int32) []byte {
	var f *kmsg.RequestFormatter
	if clientID != nil {
		f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(*clientID))
	} else {
		f = kmsg.NewRequestFormatter()
	}
	return f.AppendRequest(nil, req, corr)[4:]
}

func TestParseRequestHeaderEveryKeyAndVersion(t *testing.T) {
	id := "client-é"
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		for v := int16(0); v <= req.MaxVersion(); v++ {
			if key == 7 && v == 0 {
				continue // ControlledShutdown v0: header v0, inter-broker only
			}
			req.SetVersion(v)
			for _, cid := range []*string{nil, &id} {
				frame := formatted(req, cid, 77)
				h, err := ParseRequestHeader(frame)
				if err != nil {
					t.Fatalf("%s v%d: %v", kmsg.NameForKey(key), v, err)
				}
				if h.Key != key || h.Version != v || h.Correlation != 77 || !h.Known {
					t.Fatalf("%s v%d: parsed %+v", kmsg.NameForKey(key), v, h)
				}
				if h.Flexible != req.IsFlexible() {
					t.Fatalf("%s v%d: flexible %v, kmsg says %v", kmsg.NameForKey(key), v, h.Flexible, req.IsFlexible())
				}
				if (cid == nil) != h.ClientIDNull || (cid != nil && string(h.ClientID) != *cid) {
					t.Fatalf("%s v%d: client id %q null=%v", kmsg.NameForKey(key), v, h.ClientID, h.ClientIDNull)
				}
				// The body must decode from exactly where the header ends.
				fresh := kmsg.RequestForKey(key)
				fresh.SetVersion(v)
				if err := fresh.ReadFrom(frame[h.Len:]); err != nil {
					t.Fatalf("%s v%d: body at offset %d does not decode: %v", kmsg.NameForKey(key), v, h.Len, err)
				}
			}
		}
	}
}

func TestParseRequestHeaderTags(t *testing.T) {
	// Metadata v12 (flexible) with two header tags before the body.
	frame := []byte{0, 3, 0, 12, 0, 0, 0, 9, 0, 1, 'x'}
	frame = append(frame, 2, 0, 1, 0xaa, 5, 2, 0xbb, 0xcc)
	frame = append(frame, 0xff) // first body byte
	h, err := ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	if h.Len != len(frame)-1 {
		t.Fatalf("header length %d, want %d", h.Len, len(frame)-1)
	}
	// A tag that claims more bytes than the frame has.
	bad := append([]byte{0, 3, 0, 12, 0, 0, 0, 9, 0xff, 0xff}, 1, 0, 50)
	if _, err := ParseRequestHeader(bad); !errors.Is(err, ErrTruncated) {
		t.Fatalf("overlong tag: %v", err)
	}
}

func TestCheckSize(t *testing.T) {
	size := func(n uint32) (b [4]byte) { binary.BigEndian.PutUint32(b[:], n); return }
	for _, tc := range []struct {
		in   [4]byte
		want error
	}{
		{size(100), nil},
		{size(1 << 20), nil},
		{size(1<<20 + 1), ErrFrameTooLarge},
		{size(0x80000000), ErrBadSize},
		{[4]byte{'G', 'E', 'T', ' '}, ErrNotKafka},
		{[4]byte{'P', 'O', 'S', 'T'}, ErrNotKafka},
		{[4]byte{0x16, 0x03, 0x01, 0x02}, ErrNotKafka},
	} {
		_, err := CheckSize(tc.in, 1<<20)
		if !errors.Is(err, tc.want) {
			t.Errorf("% x: %v, want %v", tc.in, err, tc.want)
		}
	}
}

func TestResponseHeader(t *testing.T) {
	// ApiVersions v3 is flexible but its response header stays v0 (KIP-511).
	if got := AppendResponseHeader(nil, 18, 3, 5, 10); len(got) != 8 {
		t.Errorf("ApiVersions v3 header %d bytes, want 8", len(got))
	}
	if got := AppendResponseHeader(nil, 3, 12, 5, 10); len(got) != 9 || got[8] != 0 ||
		binary.BigEndian.Uint32(got) != 15 {
		t.Errorf("Metadata v12 header % x", got)
	}
}

// FuzzParseRequestHeader: for any bytes, the parser never panics, never
// reads past the frame, and a parsed header's length lies inside it.
func FuzzParseRequestHeader(f *testing.F) {
	f.Add(formatted(kmsg.NewPtrMetadataRequest(), nil, 1))
	f.Add([]byte{0, 3, 0, 12, 0, 0, 0, 9, 0, 1, 'x', 2, 0, 1, 0xaa, 5, 2, 0xbb, 0xcc})
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, err := ParseRequestHeader(frame)
		if err != nil {
			return
		}
		if h.Len < RequestHeaderMin || h.Len > len(frame) {
			t.Fatalf("header length %d outside a %d-byte frame", h.Len, len(frame))
		}
	})
}

// FuzzCheckSize: every accepted size is within [0, max].
func FuzzCheckSize(f *testing.F) {
	f.Add([]byte{0, 0, 0, 10}, int32(100))
	f.Add([]byte("GET "), int32(100))
	f.Fuzz(func(t *testing.T, b []byte, max int32) {
		if len(b) < 4 || max < 0 {
			return
		}
		n, err := CheckSize([4]byte(b), max)
		if err == nil && (n < 0 || n > max) {
			t.Fatalf("accepted size %d with max %d", n, max)
		}
	})
}
