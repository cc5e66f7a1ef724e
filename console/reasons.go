package console

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
)

// produceReasons keeps the broker's reasons for refused produces. Since
// Produce v8 (KIP-467) a partition's error comes with an ErrorMessage and
// per-record ErrorRecords ("Compacted topic cannot accept message without
// key ..."), but kgo (v1.22) reports only the error code. So `produce`
// reads them off its own connections: the client's requests are followed
// for their Produce correlation ids, and those responses are decoded once
// more, as they pass, without being changed or delayed.
type produceReasons struct {
	mu      sync.Mutex
	byPart  map[int32]reason // the last refusal per partition (produce has one topic)
	pending map[*sniffConn]map[int32]int16
}

type reason struct {
	code int16
	msg  string
}

func newProduceReasons() *produceReasons {
	return &produceReasons{byPart: map[int32]reason{}, pending: map[*sniffConn]map[int32]int16{}}
}

// explain adds the broker's reason to err, the error kgo reported for a
// record of partition p, when the broker gave one with the same code.
func (pr *produceReasons) explain(p int32, err error) error {
	var ke *kerr.Error
	if pr == nil || !errors.As(err, &ke) {
		return err
	}
	pr.mu.Lock()
	r, ok := pr.byPart[p]
	pr.mu.Unlock()
	if !ok || r.code != ke.Code {
		return err
	}
	return withMessage(err, r.msg)
}

// dialer is kgo.Dialer's function: a TCP (and, with tc, TLS) connection
// whose Produce responses are read for their reasons.
func (pr *produceReasons) dialer(tc *tls.Config) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		if tc != nil {
			cfg := tc.Clone()
			if cfg.ServerName == "" { // as kgo.DialTLSConfig does
				if h, _, err := net.SplitHostPort(host); err == nil {
					cfg.ServerName = h
				}
			}
			tlsConn := tls.Client(conn, cfg)
			if err := tlsConn.HandshakeContext(ctx); err != nil {
				conn.Close()
				return nil, err
			}
			conn = tlsConn
		}
		return &sniffConn{Conn: conn, pr: pr}, nil
	}
}

// maxSniffedResponse bounds a Produce response kept for decoding; a
// larger one (thousands of partitions) passes unread.
const maxSniffedResponse = 1 << 20

// sniffConn follows the Kafka frames on a client connection: requests
// are [size][key][version][correlation]..., responses [size][correlation]...
// (Kafka's protocol guide). Read and Write run on different goroutines.
type sniffConn struct {
	net.Conn
	pr *produceReasons

	whdr  []byte // the current request's first 12 bytes
	wleft int    // bytes of the current request still to pass

	rhdr    []byte // the current response's first 8 bytes
	rleft   int
	rver    int16
	capture bool
	rbody   []byte
}

func (c *sniffConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.sawRequest(p[:n])
	return n, err
}

func (c *sniffConn) sawRequest(p []byte) {
	for len(p) > 0 {
		if c.wleft > 0 {
			k := min(c.wleft, len(p))
			c.wleft, p = c.wleft-k, p[k:]
			continue
		}
		k := min(12-len(c.whdr), len(p))
		c.whdr, p = append(c.whdr, p[:k]...), p[k:]
		if len(c.whdr) < 12 {
			return
		}
		size := int(int32(binary.BigEndian.Uint32(c.whdr)))
		key := int16(binary.BigEndian.Uint16(c.whdr[4:]))
		if key == apis.Produce {
			ver := int16(binary.BigEndian.Uint16(c.whdr[6:]))
			corr := int32(binary.BigEndian.Uint32(c.whdr[8:]))
			c.pr.mu.Lock()
			if c.pr.pending[c] == nil {
				c.pr.pending[c] = map[int32]int16{}
			}
			c.pr.pending[c][corr] = ver
			c.pr.mu.Unlock()
		}
		c.wleft = max(size+4-12, 0)
		c.whdr = c.whdr[:0]
	}
}

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.sawResponse(p[:n])
	return n, err
}

func (c *sniffConn) sawResponse(p []byte) {
	for len(p) > 0 {
		if c.rleft > 0 {
			k := min(c.rleft, len(p))
			if c.capture {
				c.rbody = append(c.rbody, p[:k]...)
			}
			c.rleft, p = c.rleft-k, p[k:]
			if c.rleft == 0 && c.capture {
				c.pr.record(c.rver, c.rbody)
				c.capture, c.rbody = false, nil
			}
			continue
		}
		k := min(8-len(c.rhdr), len(p))
		c.rhdr, p = append(c.rhdr, p[:k]...), p[k:]
		if len(c.rhdr) < 8 {
			return
		}
		size := int(int32(binary.BigEndian.Uint32(c.rhdr)))
		corr := int32(binary.BigEndian.Uint32(c.rhdr[4:]))
		c.rleft = max(size-4, 0)
		c.rhdr = c.rhdr[:0]
		c.pr.mu.Lock()
		ver, ok := c.pr.pending[c][corr]
		delete(c.pr.pending[c], corr)
		c.pr.mu.Unlock()
		c.capture, c.rver = ok && c.rleft > 0 && c.rleft <= maxSniffedResponse, ver
	}
}

func (c *sniffConn) Close() error {
	c.pr.mu.Lock()
	delete(c.pr.pending, c)
	c.pr.mu.Unlock()
	return c.Conn.Close()
}

// record decodes one Produce response body (after the correlation id)
// and keeps each refused partition's reason: the record errors' message
// when they all say the same, else the partition's ErrorMessage.
func (pr *produceReasons) record(ver int16, body []byte) {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = ver
	if resp.IsFlexible() { // the response header's tagged fields
		var ok bool
		if body, ok = skipTags(body); !ok {
			return
		}
	}
	if resp.ReadFrom(body) != nil {
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 {
				continue
			}
			msg := ""
			if p.ErrorMessage != nil {
				msg = *p.ErrorMessage
			}
			if m := sameRecordError(p.ErrorRecords); m != "" {
				msg = m
			}
			if msg != "" {
				pr.byPart[p.Partition] = reason{p.ErrorCode, msg}
			}
		}
	}
}

func sameRecordError(recs []kmsg.ProduceResponseTopicPartitionErrorRecord) string {
	msg := ""
	for i, r := range recs {
		if r.ErrorMessage == nil || (i > 0 && *r.ErrorMessage != msg) {
			return ""
		}
		msg = *r.ErrorMessage
	}
	return msg
}

// skipTags skips a tagged-field section (KIP-482): a count, then per
// field its tag, size and bytes, all unsigned varints but the bytes.
func skipTags(b []byte) ([]byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, false
	}
	b = b[k:]
	for ; n > 0; n-- {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, false
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < size {
			return nil, false
		}
		b = b[k+int(size):]
	}
	return b, true
}
