package proxy_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"reflect"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// nodeScanner is a kgo dialer that decodes every response the client
// reads (with kmsg, by the key and version of the request it wrote) and
// records every node id in it other than the virtual one.
type nodeScanner struct {
	virtual int32
	addr    string // host:port every address must be (the gateway's)
	mu      sync.Mutex
	bad     []string
	seen    int // responses decoded
}

type scanConn struct {
	net.Conn
	s        *nodeScanner
	mu       sync.Mutex
	wbuf     bytes.Buffer
	rbuf     bytes.Buffer
	inflight map[int32][2]int16 // corr → key, version
}

func (s *nodeScanner) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if addr != s.addr {
		// The client was told of another address: single-port means the
		// one port is all a client ever needs to reach.
		s.fail(fmt.Sprintf("client dialled %s, not the gateway's one port %s", addr, s.addr))
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &scanConn{Conn: c, s: s, inflight: map[int32][2]int16{}}, nil
}

func (c *scanConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.wbuf.Write(p)
	for c.wbuf.Len() >= 12 {
		b := c.wbuf.Bytes()
		n := int(binary.BigEndian.Uint32(b))
		if len(b) < 4+n {
			break
		}
		key, ver := int16(binary.BigEndian.Uint16(b[4:])), int16(binary.BigEndian.Uint16(b[6:]))
		corr := int32(binary.BigEndian.Uint32(b[8:]))
		if !(key == 0 && produceAcksZero(b[4:4+n], ver)) {
			c.inflight[corr] = [2]int16{key, ver}
		}
		c.wbuf.Next(4 + n)
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// produceAcksZero is false: the scanner never sees acks=0 in these tests
// (every producer uses acks=all); kept as the one place to change that.
func produceAcksZero([]byte, int16) bool { return false }

func (c *scanConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.rbuf.Write(p[:n])
	for c.rbuf.Len() >= 8 {
		b := c.rbuf.Bytes()
		size := int(binary.BigEndian.Uint32(b))
		if len(b) < 4+size {
			break
		}
		corr := int32(binary.BigEndian.Uint32(b[4:]))
		kv, ok := c.inflight[corr]
		delete(c.inflight, corr)
		if ok {
			c.s.check(kv[0], kv[1], b[8:4+size])
		}
		c.rbuf.Next(4 + size)
	}
	c.mu.Unlock()
	return n, err
}

func (s *nodeScanner) check(key, ver int16, body []byte) {
	resp := kmsg.ResponseForKey(key)
	if resp == nil {
		return
	}
	resp.SetVersion(ver)
	if resp.IsFlexible() && key != 18 {
		if len(body) == 0 || body[0] != 0 {
			s.fail(fmt.Sprintf("%s v%d: header tags", kmsg.NameForKey(key), ver))
			return
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		s.fail(fmt.Sprintf("%s v%d: decode: %v", kmsg.NameForKey(key), ver, err))
		return
	}
	s.mu.Lock()
	s.seen++
	s.mu.Unlock()
	if fc, ok := resp.(*kmsg.FindCoordinatorResponse); ok && ver >= 4 {
		// v4+ has no top-level node fields (they decode as zero values).
		s.walk("FindCoordinator", reflect.ValueOf(fc.Coordinators))
		return
	}
	s.walk(kmsg.NameForKey(key), reflect.ValueOf(resp).Elem())
}

// nodeFields are the response fields that carry node ids.
var nodeFields = map[string]bool{"NodeID": true, "LeaderID": true, "Leader": true, "ControllerID": true, "BrokerID": true,
	"Replicas": true, "ISR": true, "OfflineReplicas": true, "EligibleLeaderReplicas": true, "LastKnownELR": true, "PreferredReadReplica": true}

func (s *nodeScanner) walk(path string, v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			fv := v.Field(i)
			if f.Name == "Host" && fv.Kind() == reflect.String {
				s.checkAddr(path, v)
				continue
			}
			if nodeFields[f.Name] {
				s.checkIDs(path+"."+f.Name, fv)
				continue
			}
			s.walk(path+"."+f.Name, fv)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			s.walk(path, v.Index(i))
		}
	}
}

func (s *nodeScanner) checkIDs(path string, v reflect.Value) {
	var ids []int32
	switch x := v.Interface().(type) {
	case int32:
		ids = []int32{x}
	case []int32:
		ids = x
	}
	for _, id := range ids {
		if id >= 0 && id != s.virtual {
			s.fail(fmt.Sprintf("%s = %d, not the virtual node %d", path, id, s.virtual))
		}
	}
}

func (s *nodeScanner) fail(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bad) < 20 {
		s.bad = append(s.bad, msg)
	}
}

// checkAddr checks a struct's Host (and Port) against the gateway's.
func (s *nodeScanner) checkAddr(path string, v reflect.Value) {
	host := v.FieldByName("Host").String()
	port := v.FieldByName("Port")
	got := host
	if port.IsValid() && port.CanInt() {
		got = net.JoinHostPort(host, fmt.Sprint(port.Int()))
	}
	if got != s.addr {
		s.fail(fmt.Sprintf("%s: address %s, not the gateway's %s", path, got, s.addr))
	}
}
