//go:build linux

package netimpair

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The NFQUEUE delayer, for kernels without netem: iptables rules in the
// namespace send every packet of the link (INPUT from it, OUTPUT to it)
// to a netfilter queue; this process reads the queue over netlink
// (nfnetlink_queue, the protocol of include/uapi/linux/netfilter/
// nfnetlink_queue.h), holds each packet for its delay and then accepts it
// (NF_ACCEPT verdict), packets being released in release-time order. A
// packet whose verdict is late leaves the kernel late: TCP sees a delayed,
// and with jitter reordered, network. Only the first bytes of each packet
// are copied to this process (the IPv4 and TCP headers, to tell flows
// apart for the reorder count).

// nfnetlink constants (linux/netfilter/nfnetlink.h, nfnetlink_queue.h).
const (
	nfnlSubsysQueue  = 3
	nfqnlMsgPacket   = 0
	nfqnlMsgVerdict  = 1
	nfqnlMsgConfig   = 2
	nfqaPacketHdr    = 1
	nfqaVerdictHdr   = 2
	nfqaPayload      = 10
	nfqaCfgCmd       = 1
	nfqaCfgParams    = 2
	nfqaCfgQueueMax  = 3
	nfqnlCfgCmdBind  = 1
	nfqnlCopyPacket  = 2
	nfAccept         = 1
	netlinkNoENOBUFS = 5
	copyRange        = 64 // an IPv4 header with options, and the TCP ports
	queueMaxLen      = 16384
)

type delayerConfig struct {
	delay        time.Duration
	jitter       time.Duration // release at delay ± jitter, uniform
	immediatePct int           // this share of packets released at once (netem's reorder)
}

func (c delayerConfig) String() string {
	if c.immediatePct > 0 {
		return fmt.Sprintf("%d%% of packets at once, the others held %v", c.immediatePct, c.delay)
	}
	return fmt.Sprintf("every packet held %v ± %v (uniform)", c.delay, c.jitter)
}

// heldPacket is a packet waiting for its verdict.
type heldPacket struct {
	at   time.Time
	id   uint32
	flow [12]byte // source and destination address and port
	seq  uint64   // arrival order within the flow
}

// flowOrder is one flow's released packets: every arrival number below
// next, and those in done.
type flowOrder struct {
	next uint64
	done map[uint64]bool
}

// release records packet seq released and reports whether it overtook an
// earlier packet of the flow still held.
func (f *flowOrder) release(seq uint64) (overtook bool) {
	overtook = seq != f.next
	f.done[seq] = true
	for f.done[f.next] {
		delete(f.done, f.next)
		f.next++
	}
	return overtook
}

type packetHeap []heldPacket

func (h packetHeap) Len() int { return len(h) }
func (h packetHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].id < h[j].id
	}
	return h[i].at.Before(h[j].at)
}
func (h packetHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *packetHeap) Push(x any)   { *h = append(*h, x.(heldPacket)) }
func (h *packetHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type delayer struct {
	cfg   delayerConfig
	fd    int
	queue uint16
	rnd   *rand.Rand

	stop chan struct{}
	wake chan struct{}
	wg   sync.WaitGroup

	mu        sync.Mutex
	held      packetHeap
	arrived   map[[12]byte]uint64 // per flow: packets seen
	released  map[[12]byte]*flowOrder
	packets   int64
	reordered int64 // released ahead of a packet of its flow that arrived before it
	verdictEr int64
	lastErr   error
}

// delayer starts a delayer on the link: binds a queue in the namespace,
// then adds the iptables rules that feed it.
func (l *Link) delayer(c delayerConfig) (*Impairment, error) {
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil, fmt.Errorf("netimpair: this kernel has no tc netem and there is no iptables for the NFQUEUE delayer that stands in for it (make deps installs iptables): %w", err)
	}
	l.mu.Lock()
	q := l.queueNo
	l.queueNo++
	l.mu.Unlock()
	d := &delayer{cfg: c, queue: q, rnd: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		stop: make(chan struct{}), wake: make(chan struct{}, 1),
		arrived: map[[12]byte]uint64{}, released: map[[12]byte]*flowOrder{}}
	if err := l.InNS(func() error {
		var err error
		d.fd, err = openQueue(q)
		return err
	}); err != nil {
		return nil, fmt.Errorf("netimpair: nfqueue in %s: %w", l.NS, err)
	}
	d.wg.Add(2)
	go d.read()
	go d.release()
	qs := strconv.Itoa(int(q))
	rules := [][]string{
		{"INPUT", "-i", l.NSIf, "-j", "NFQUEUE", "--queue-num", qs},
		{"OUTPUT", "-o", l.NSIf, "-j", "NFQUEUE", "--queue-num", qs},
	}
	var added [][]string
	unrule := func() error {
		var errs []error
		for _, r := range added {
			args := append([]string{"netns", "exec", l.NS, "iptables", "-w", "-D"}, r...)
			if out, err := run("ip", args...); err != nil {
				errs = append(errs, fmt.Errorf("iptables -D %v in %s: %v: %s", r, l.NS, err, out))
			}
		}
		added = nil
		return errors.Join(errs...)
	}
	for _, r := range rules {
		args := append([]string{"netns", "exec", l.NS, "iptables", "-w", "-A"}, r...)
		if out, err := run("ip", args...); err != nil {
			unrule()
			d.close()
			return nil, fmt.Errorf("netimpair: iptables -A %v in %s: %v: %s", r, l.NS, err, out)
		}
		added = append(added, r)
	}
	return l.add(&Impairment{
		Method: "NFQUEUE delayer (iptables in the namespace, verdicts from the runner; no netem in this kernel): " + c.String() + ", each direction",
		undo: func() (string, error) {
			err := unrule() // new packets pass at once from here
			// Release what is held at its time, then stop.
			deadline := time.Now().Add(c.delay + c.jitter + time.Second)
			for time.Now().Before(deadline) {
				d.mu.Lock()
				n := len(d.held)
				d.mu.Unlock()
				if n == 0 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			d.close()
			return d.stats(), errors.Join(err, d.lastError())
		},
	}), nil
}

func (d *delayer) close() {
	select {
	case <-d.stop:
		return
	default:
	}
	close(d.stop)
	d.wg.Wait()
	unix.Close(d.fd)
}

func (d *delayer) lastError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.verdictEr > 0 {
		return fmt.Errorf("nfqueue: %d verdicts failed, last: %w", d.verdictEr, d.lastErr)
	}
	return nil
}

func (d *delayer) stats() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	pct := 0.0
	if d.packets > 0 {
		pct = 100 * float64(d.reordered) / float64(d.packets)
	}
	return fmt.Sprintf("%d packets delayed, %d (%.2f%%) released ahead of an earlier packet of their flow", d.packets, d.reordered, pct)
}

// openQueue opens a netlink socket (in the calling thread's namespace),
// binds queue q and asks for the first copyRange bytes of each packet.
func openQueue(q uint16) (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return -1, fmt.Errorf("netlink socket: %w", err)
	}
	fail := func(err error) (int, error) {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fail(fmt.Errorf("netlink bind: %w", err))
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
	unix.SetsockoptInt(fd, unix.SOL_NETLINK, netlinkNoENOBUFS, 1)
	// The reader wakes every 100 ms to see whether it is to stop.
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100_000}); err != nil {
		return fail(fmt.Errorf("SO_RCVTIMEO: %w", err))
	}
	var attrs []byte
	attrs = appendAttr(attrs, nfqaCfgCmd, []byte{nfqnlCfgCmdBind, 0, 0, 0})
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params, copyRange)
	params[4] = nfqnlCopyPacket
	attrs = appendAttr(attrs, nfqaCfgParams, params)
	attrs = appendAttr(attrs, nfqaCfgQueueMax, binary.BigEndian.AppendUint32(nil, queueMaxLen))
	msg := nfMessage(nfqnlMsgConfig, unix.NLM_F_REQUEST|unix.NLM_F_ACK, q, attrs)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fail(fmt.Errorf("nfqueue config: %w", err))
	}
	buf := make([]byte, 8192)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fail(fmt.Errorf("nfqueue config answer: %w", err))
		}
		msgs, err := parseNetlink(buf[:n])
		if err != nil {
			return fail(err)
		}
		for _, m := range msgs {
			if m.typ == unix.NLMSG_ERROR && len(m.data) >= 4 {
				if e := int32(binary.NativeEndian.Uint32(m.data)); e != 0 {
					return fail(fmt.Errorf("nfqueue bind queue %d: %w", q, unix.Errno(-e)))
				}
				return fd, nil
			}
		}
	}
	return fail(errors.New("nfqueue config: no answer within 5s"))
}

// nfMessage is a netlink message of the queue subsystem: nlmsghdr,
// nfgenmsg (AF_UNSPEC, version 0, the queue number big-endian), attrs.
func nfMessage(typ uint16, flags uint16, q uint16, attrs []byte) []byte {
	b := make([]byte, 20, 20+len(attrs))
	binary.NativeEndian.PutUint32(b[0:], uint32(20+len(attrs)))
	binary.NativeEndian.PutUint16(b[4:], nfnlSubsysQueue<<8|typ)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.BigEndian.PutUint16(b[18:], q)
	return append(b, attrs...)
}

// appendAttr appends a netlink attribute (nlattr, padded to 4 bytes).
func appendAttr(b []byte, typ uint16, v []byte) []byte {
	h := make([]byte, 4)
	binary.NativeEndian.PutUint16(h[0:], uint16(4+len(v)))
	binary.NativeEndian.PutUint16(h[2:], typ)
	b = append(append(b, h...), v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

type nlMsg struct {
	typ  uint16
	data []byte // after the nlmsghdr
}

func parseNetlink(b []byte) ([]nlMsg, error) {
	var out []nlMsg
	for len(b) >= 16 {
		l := int(binary.NativeEndian.Uint32(b[0:]))
		if l < 16 || l > len(b) {
			return out, fmt.Errorf("netlink: bad message length %d of %d", l, len(b))
		}
		out = append(out, nlMsg{typ: binary.NativeEndian.Uint16(b[4:]), data: b[16:l]})
		b = b[min(len(b), (l+3)&^3):]
	}
	return out, nil
}

// packet parses a queued packet: its id and the first bytes of it.
func parsePacket(data []byte) (id uint32, payload []byte, ok bool) {
	if len(data) < 4 {
		return 0, nil, false
	}
	a := data[4:] // after nfgenmsg
	for len(a) >= 4 {
		l := int(binary.NativeEndian.Uint16(a[0:]))
		typ := binary.NativeEndian.Uint16(a[2:]) & 0x3fff
		if l < 4 || l > len(a) {
			break
		}
		v := a[4:l]
		switch typ {
		case nfqaPacketHdr:
			if len(v) >= 4 {
				id, ok = binary.BigEndian.Uint32(v), true
			}
		case nfqaPayload:
			payload = v
		}
		a = a[min(len(a), (l+3)&^3):]
	}
	return id, payload, ok
}

// flowOf is an IPv4 TCP or UDP packet's addresses and ports (zero for
// anything else: one flow).
func flowOf(p []byte) (f [12]byte) {
	if len(p) < 20 || p[0]>>4 != 4 {
		return f
	}
	ihl := int(p[0]&0xf) * 4
	copy(f[0:8], p[12:20])
	if (p[9] == 6 || p[9] == 17) && len(p) >= ihl+4 {
		copy(f[8:12], p[ihl:ihl+4])
	}
	return f
}

func (d *delayer) read() {
	defer d.wg.Done()
	buf := make([]byte, 1<<16)
	for {
		select {
		case <-d.stop:
			return
		default:
		}
		n, _, err := unix.Recvfrom(d.fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOBUFS) {
				continue
			}
			d.mu.Lock()
			d.verdictEr++
			d.lastErr = fmt.Errorf("nfqueue read: %w", err)
			d.mu.Unlock()
			return
		}
		msgs, _ := parseNetlink(buf[:n])
		now := time.Now()
		woke := false
		d.mu.Lock()
		for _, m := range msgs {
			if m.typ != nfnlSubsysQueue<<8|nfqnlMsgPacket {
				continue
			}
			id, payload, ok := parsePacket(m.data)
			if !ok {
				continue
			}
			p := heldPacket{id: id, flow: flowOf(payload)}
			p.seq = d.arrived[p.flow]
			d.arrived[p.flow]++
			hold := d.cfg.delay
			if d.cfg.immediatePct > 0 && d.rnd.IntN(100) < d.cfg.immediatePct {
				hold = 0
			} else if d.cfg.jitter > 0 {
				hold += time.Duration(d.rnd.Int64N(int64(2*d.cfg.jitter)+1)) - d.cfg.jitter
			}
			p.at = now.Add(max(hold, 0))
			heap.Push(&d.held, p)
			d.packets++
			woke = woke || d.held[0].id == id
		}
		d.mu.Unlock()
		if woke {
			select {
			case d.wake <- struct{}{}:
			default:
			}
		}
	}
}

// release accepts each held packet at its time, earliest first.
func (d *delayer) release() {
	defer d.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		d.mu.Lock()
		var due []heldPacket
		now := time.Now()
		for len(d.held) > 0 && !d.held[0].at.After(now) {
			p := heap.Pop(&d.held).(heldPacket)
			fo := d.released[p.flow]
			if fo == nil {
				fo = &flowOrder{done: map[uint64]bool{}}
				d.released[p.flow] = fo
			}
			if fo.release(p.seq) {
				d.reordered++
			}
			due = append(due, p)
		}
		wait := time.Hour
		if len(d.held) > 0 {
			wait = d.held[0].at.Sub(now)
		}
		d.mu.Unlock()
		for _, p := range due {
			d.verdict(p.id)
		}
		if len(due) > 0 {
			continue
		}
		t.Reset(wait)
		select {
		case <-d.stop:
			// Accept what is still held: the rules are gone.
			d.mu.Lock()
			rest := d.held
			d.held = nil
			d.mu.Unlock()
			for _, p := range rest {
				d.verdict(p.id)
			}
			return
		case <-d.wake:
		case <-t.C:
		}
	}
}

func (d *delayer) verdict(id uint32) {
	v := make([]byte, 8)
	binary.BigEndian.PutUint32(v[0:], nfAccept)
	binary.BigEndian.PutUint32(v[4:], id)
	msg := nfMessage(nfqnlMsgVerdict, unix.NLM_F_REQUEST, d.queue, appendAttr(nil, nfqaVerdictHdr, v))
	if err := unix.Sendto(d.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		d.mu.Lock()
		d.verdictEr++
		d.lastErr = err
		d.mu.Unlock()
	}
}
