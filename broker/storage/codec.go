package storage

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Decompression for the record walker. Every codec is read as a stream
// and bounded: the walker charges each decompressed byte to
// MaxDecompressedBytes, and snappy, whose blocks decode whole, checks each
// block's declared length first.

const (
	codecNone = iota
	codecGzip
	codecSnappy
	codecLz4
	codecZstd
)

func codecName(c int) string {
	switch c {
	case codecGzip:
		return "gzip"
	case codecSnappy:
		return "snappy"
	case codecLz4:
		return "lz4"
	case codecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec %d", c)
}

// maxZstdWindow bounds the window a zstd frame may ask the decoder to
// allocate. Producers compress one batch, so their windows are no larger
// than the batch; klauspost's default (512 MiB) would let one produce
// reserve that much.
const maxZstdWindow = 32 << 20

// maxSnappyRatio bounds a snappy block's declared decoded length by its
// compressed length: snappy's densest element (a 3-byte copy of 64 bytes)
// expands about 21 times.
const maxSnappyRatio = 32

// errSnappyFraming is a snappy payload whose xerial framing is broken.
var errSnappyFraming = errors.New("malformed xerial snappy framing")

// decompressor is an io.Reader of decompressed bytes with a close that
// returns pooled state.
type decompressor struct {
	io.Reader
	close func()
}

var zstdPool sync.Pool // *zstd.Decoder, streaming, one goroutine each

func newDecompressor(codec int, src io.Reader) (*decompressor, error) {
	switch codec {
	case codecGzip:
		r, err := gzip.NewReader(src)
		if err != nil {
			return nil, err
		}
		return &decompressor{Reader: r, close: func() { r.Close() }}, nil
	case codecLz4:
		return &decompressor{Reader: lz4.NewReader(src), close: func() {}}, nil
	case codecZstd:
		d, _ := zstdPool.Get().(*zstd.Decoder)
		if d == nil {
			var err error
			d, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxWindow(maxZstdWindow), zstd.WithDecoderMaxMemory(MaxDecompressedBytes+1))
			if err != nil {
				return nil, err
			}
		}
		if err := d.Reset(src); err != nil {
			zstdPool.Put(d)
			return nil, err
		}
		return &decompressor{Reader: d, close: func() { d.Reset(nil); zstdPool.Put(d) }}, nil
	case codecSnappy:
		payload, err := io.ReadAll(src) // blocks decode whole; the payload passed max.message.bytes
		if err != nil {
			return nil, err
		}
		return &decompressor{Reader: newSnappyReader(payload), close: func() {}}, nil
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}

// xerialMagic starts a snappy payload framed as the Java producer frames it
// (snappy-java's SnappyOutputStream): the magic, two int32 versions, then
// blocks of an int32 length and a raw snappy block. librdkafka and kgo
// also send it; older clients send one raw block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderLen = 16

// snappyReader decodes a snappy payload block by block.
type snappyReader struct {
	rest   []byte // blocks not yet decoded
	xerial bool
	cur    []byte // decoded bytes not yet read
	buf    []byte
}

func newSnappyReader(p []byte) *snappyReader {
	if len(p) >= xerialHeaderLen && bytes.HasPrefix(p, xerialMagic) {
		return &snappyReader{rest: p[xerialHeaderLen:], xerial: true}
	}
	return &snappyReader{rest: p}
}

func (r *snappyReader) Read(b []byte) (int, error) {
	for len(r.cur) == 0 {
		if len(r.rest) == 0 {
			return 0, io.EOF
		}
		if err := r.next(); err != nil {
			return 0, err
		}
	}
	n := copy(b, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// next decodes the next block into cur.
func (r *snappyReader) next() error {
	block := r.rest
	if r.xerial {
		if len(r.rest) < 4 {
			return errSnappyFraming
		}
		n := int64(int32(binary.BigEndian.Uint32(r.rest)))
		if n < 0 || n > int64(len(r.rest)-4) {
			return errSnappyFraming
		}
		block, r.rest = r.rest[4:4+n], r.rest[4+n:]
	} else {
		r.rest = nil
	}
	l, err := s2.DecodedLen(block)
	if err != nil {
		return err
	}
	if l > maxSnappyRatio*len(block)+64 || l > MaxDecompressedBytes {
		return fmt.Errorf("snappy block of %d bytes claims %d decoded bytes", len(block), l)
	}
	if cap(r.buf) < l {
		r.buf = make([]byte, l)
	}
	out, err := s2.Decode(r.buf[:l], block)
	if err != nil {
		return err
	}
	r.cur = out
	return nil
}

// streamSource reads decompressed records, charging every byte to a
// budget. With keep set, taken bytes are copied into a per-record arena
// (and the record's raw bytes are kept for since); otherwise they are
// discarded.
type streamSource struct {
	r     io.Reader
	br    *bufio.Reader
	left  int64 // decompressed bytes still allowed
	off   int64
	keep  bool
	arena []byte // this record's bytes, when keep
}

var sourceReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

func (s *streamSource) reader() *bufio.Reader {
	if s.br == nil {
		s.br = sourceReaders.Get().(*bufio.Reader)
		s.br.Reset(s.r)
	}
	return s.br
}

// release gives the buffered reader back; the source is done.
func (s *streamSource) release() {
	if s.br != nil {
		s.br.Reset(nil)
		sourceReaders.Put(s.br)
		s.br = nil
	}
}

func (s *streamSource) charge(n int) error {
	s.left -= int64(n)
	s.off += int64(n)
	if s.left < 0 {
		return fmt.Errorf("%w: batch decompresses to more than %d bytes", ErrInvalidRecord, MaxDecompressedBytes)
	}
	return nil
}

func (s *streamSource) ReadByte() (byte, error) {
	c, err := s.reader().ReadByte()
	if err != nil {
		return 0, decodeErr(err)
	}
	if err := s.charge(1); err != nil {
		return 0, err
	}
	if s.keep {
		s.arena = append(s.arena, c)
	}
	return c, nil
}

func (s *streamSource) take(n int) ([]byte, error) {
	if int64(n) > s.left {
		return nil, s.charge(n)
	}
	if !s.keep {
		k, err := s.reader().Discard(n)
		if err := s.charge(k); err != nil {
			return nil, err
		}
		return nil, decodeErr(err)
	}
	start := len(s.arena)
	for n > 0 { // grow as bytes arrive, not by the declared length
		chunk := min(n, 64<<10)
		at := len(s.arena)
		s.arena = append(s.arena, make([]byte, chunk)...)
		k, err := io.ReadFull(s.reader(), s.arena[at:])
		if err := s.charge(k); err != nil {
			return nil, err
		}
		if err != nil {
			return nil, decodeErr(err)
		}
		n -= chunk
	}
	return s.arena[start:len(s.arena):len(s.arena)], nil
}

func (s *streamSource) consumed() int64 { return s.off }
func (s *streamSource) startRecord()    { s.arena = s.arena[:0] }
func (s *streamSource) mark() int64     { return int64(len(s.arena)) }

func (s *streamSource) since(m int64) []byte {
	if !s.keep {
		return nil
	}
	return s.arena[m:len(s.arena):len(s.arena)]
}

// decodeErr maps a decompressor's failure (other than running out, which
// the walker reports as a short record) to ErrCorruptMessage.
func decodeErr(err error) error {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	return fmt.Errorf("%w: decompress: %v", ErrCorruptMessage, err)
}
