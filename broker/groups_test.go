package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/tollgate-kafka/tollgate/proxy"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var gatewayLogOut io.Writer = io.Discard

// startGateway serves b through the real gateway (proxy.New with Local =
// b, as cmd/tollgate does) and returns its address.
func startGateway(t testing.TB, b *Broker) string {
	t.Helper()
	log := slog.New(slog.NewTextHandler(gatewayLogOut, nil))
	srv, err := proxy.New(proxy.Options{
		Listeners: []proxy.ListenerOptions{{Name: "test", Listen: "127.0.0.1:0"}},
		Local:     proxy.LocalFunc(func(remote string) proxy.LocalConn { return b.NewConn(remote) }),
		Logger:    log,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv.Addr(0).String()
}

// groupBroker opens a broker with short group timeouts for tests.
func groupBroker(t testing.TB, dir string, mut ...func(*Config)) *Broker {
	return openBroker(t, dir, append([]func(*Config){func(c *Config) {
		c.GroupMinSessionTimeout = 100 * time.Millisecond
	}}, mut...)...)
}

// mustCall runs req through c and decodes the response.
func mustCall[R kmsg.Response](t testing.TB, c *Conn, req kmsg.Request) R {
	t.Helper()
	body, err := call(c, req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	raw, err := io.ReadAll(bodyReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(raw); err != nil {
		t.Fatalf("decode %s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp.(R)
}

// bodyReader adapts a wire.Body to an io.Reader.
func bodyReader(b interface {
	WriteTo(io.Writer) (int64, error)
}) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		_, err := b.WriteTo(pw)
		pw.CloseWithError(err)
	}()
	return pr
}

func joinReq(group, member string, version int16, protocols ...string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = version
	req.Group, req.MemberID = group, member
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 2000
	req.ProtocolType = "consumer"
	for _, p := range protocols {
		jp := kmsg.NewJoinGroupRequestProtocol()
		jp.Name, jp.Metadata = p, []byte(p)
		req.Protocols = append(req.Protocols, jp)
	}
	return req
}

// joinAsync sends a JoinGroup that may wait; the channel gets its answer.
func joinAsync(t testing.TB, c *Conn, req *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { ch <- mustCall[*kmsg.JoinGroupResponse](t, c, req) }()
	return ch
}

func TestGroupJoinSyncStateMachine(t *testing.T) {
	b := groupBroker(t, t.TempDir())
	c := b.NewConn("test")
	defer c.Close()

	// Validation errors.
	bad := joinReq("g", "", 9, "range")
	bad.SessionTimeoutMillis = 10
	if r := mustCall[*kmsg.JoinGroupResponse](t, c, bad); r.ErrorCode != kerr.InvalidSessionTimeout.Code {
		t.Fatalf("tiny session timeout: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := mustCall[*kmsg.JoinGroupResponse](t, c, joinReq("", "", 9, "range")); r.ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("empty group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := mustCall[*kmsg.JoinGroupResponse](t, c, joinReq("g", "", 9)); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("no protocols: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// KIP-394: v4+ dynamic members get MEMBER_ID_REQUIRED first.
	r1 := mustCall[*kmsg.JoinGroupResponse](t, c, joinReq("g", "", 9, "range", "roundrobin"))
	if r1.ErrorCode != kerr.MemberIDRequired.Code || r1.MemberID == "" {
		t.Fatalf("first join: %v %q", kerr.ErrorForCode(r1.ErrorCode), r1.MemberID)
	}
	m1 := r1.MemberID
	j1 := mustCall[*kmsg.JoinGroupResponse](t, c, joinReq("g", m1, 9, "range", "roundrobin"))
	if j1.ErrorCode != 0 || j1.Generation != 1 || j1.LeaderID != m1 || len(j1.Members) != 1 || *j1.Protocol != "range" {
		t.Fatalf("join: %+v", j1)
	}
	// An incompatible protocol set is refused while m1 is a member.
	if r := mustCall[*kmsg.JoinGroupResponse](t, c, joinReq("g", "", 9, "sticky")); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("incompatible join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version = 5
	sync.Group, sync.MemberID, sync.Generation = "g", m1, 1
	sa := kmsg.NewSyncGroupRequestGroupAssignment()
	sa.MemberID, sa.MemberAssignment = m1, []byte("a1")
	sync.GroupAssignment = append(sync.GroupAssignment, sa)
	if s := mustCall[*kmsg.SyncGroupResponse](t, c, sync); s.ErrorCode != 0 || string(s.MemberAssignment) != "a1" {
		t.Fatalf("sync: %v %q", kerr.ErrorForCode(s.ErrorCode), s.MemberAssignment)
	}

	// A second member joins (v3: no member-id round): the group rebalances
	// and the join waits until m1 rejoins too.
	c2 := b.NewConn("test2")
	defer c2.Close()
	wait2 := joinAsync(t, c2, joinReq("g", "", 3, "roundrobin", "range"))
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", m1, 1
	checkFor(t, func() bool {
		return mustCall[*kmsg.HeartbeatResponse](t, c, hb).ErrorCode == kerr.RebalanceInProgress.Code
	})
	j1b := mustCall[*kmsg.JoinGroupResponse](t, c, joinReq("g", m1, 9, "range", "roundrobin"))
	j2 := <-wait2
	if j1b.ErrorCode != 0 || j2.ErrorCode != 0 || j1b.Generation != 2 || j2.Generation != 2 {
		t.Fatalf("rejoin: %v/%d %v/%d", kerr.ErrorForCode(j1b.ErrorCode), j1b.Generation, kerr.ErrorForCode(j2.ErrorCode), j2.Generation)
	}
	// Votes: m1 prefers range, m2 roundrobin: a tie broken by name.
	if *j1b.Protocol != "range" || j1b.LeaderID != m1 || len(j1b.Members) != 2 || len(j2.Members) != 0 {
		t.Fatalf("second generation: protocol %s leader %s members %d/%d", *j1b.Protocol, j1b.LeaderID, len(j1b.Members), len(j2.Members))
	}
	m2 := j2.MemberID
	// Old generation: ILLEGAL_GENERATION; unknown member: UNKNOWN_MEMBER_ID.
	if r := mustCall[*kmsg.HeartbeatResponse](t, c, hb); r.ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("stale heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	hb.MemberID = "nobody"
	if r := mustCall[*kmsg.HeartbeatResponse](t, c, hb); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// The follower's sync waits for the leader's.
	s2req := kmsg.NewPtrSyncGroupRequest()
	s2req.Group, s2req.MemberID, s2req.Generation = "g", m2, 2
	s2 := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { s2 <- mustCall[*kmsg.SyncGroupResponse](t, c2, s2req) }()
	sync.Generation = 2
	sync.GroupAssignment = nil // the leader leaves m2 out: it gets an empty consumer assignment
	sa.MemberAssignment = []byte("a1-2")
	sync.GroupAssignment = append(sync.GroupAssignment, sa)
	if s := mustCall[*kmsg.SyncGroupResponse](t, c, sync); s.ErrorCode != 0 {
		t.Fatalf("leader sync: %v", kerr.ErrorForCode(s.ErrorCode))
	}
	if s := <-s2; s.ErrorCode != 0 || len(s.MemberAssignment) == 0 {
		t.Fatalf("follower sync: %v %q", kerr.ErrorForCode(s.ErrorCode), s.MemberAssignment)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version = 5
	dg.Groups = []string{"g", "missing"}
	d := mustCall[*kmsg.DescribeGroupsResponse](t, c, dg)
	if d.Groups[0].State != "Stable" || len(d.Groups[0].Members) != 2 || d.Groups[0].Protocol != "range" || d.Groups[1].State != "Dead" {
		t.Fatalf("describe: %+v", d.Groups)
	}

	// Leaving (v3 batch) rebalances; the last member out leaves it Empty.
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version = 5
	lv.Group = "g"
	lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: m2}, {MemberID: "nobody"}}
	l := mustCall[*kmsg.LeaveGroupResponse](t, c, lv)
	if l.Members[0].ErrorCode != 0 || l.Members[1].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave: %+v", l.Members)
	}
	dg.Groups = []string{"g"}
	if st := mustCall[*kmsg.DescribeGroupsResponse](t, c, dg).Groups[0].State; st != "PreparingRebalance" {
		t.Fatalf("after a leave: %s", st)
	}
	lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: m1}}
	mustCall[*kmsg.LeaveGroupResponse](t, c, lv)
	if st := mustCall[*kmsg.DescribeGroupsResponse](t, c, dg).Groups[0].State; st != "Empty" {
		t.Fatalf("after all left: %s", st)
	}

	// ListGroups with a state filter.
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 5
	lg.StatesFilter = []string{"stable"}
	if r := mustCall[*kmsg.ListGroupsResponse](t, c, lg); len(r.Groups) != 0 {
		t.Fatalf("stable groups: %+v", r.Groups)
	}
	lg.StatesFilter = []string{"Empty"}
	if r := mustCall[*kmsg.ListGroupsResponse](t, c, lg); len(r.Groups) != 1 || r.Groups[0].Group != "g" || r.Groups[0].ProtocolType != "consumer" {
		t.Fatalf("empty groups: %+v", r.Groups)
	}
	// DeleteGroups: an empty group goes; a missing one is GROUP_ID_NOT_FOUND.
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g", "missing"}
	dr := mustCall[*kmsg.DeleteGroupsResponse](t, c, del)
	if dr.Groups[0].ErrorCode != 0 || dr.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete: %+v", dr.Groups)
	}
}

func TestGroupSessionExpiry(t *testing.T) {
	b := groupBroker(t, t.TempDir())
	c := b.NewConn("test")
	defer c.Close()
	req := joinReq("exp", "", 3, "range")
	req.SessionTimeoutMillis = 200
	j := mustCall[*kmsg.JoinGroupResponse](t, c, req)
	if j.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(j.ErrorCode))
	}
	// No heartbeat: the member expires and the group goes Empty.
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"exp"}
	checkFor(t, func() bool {
		return mustCall[*kmsg.DescribeGroupsResponse](t, c, dg).Groups[0].State == "Empty"
	})
}

func TestOffsetCommitFetch(t *testing.T) {
	dir := t.TempDir()
	b := groupBroker(t, dir)
	srv := startServer(t, b)
	createTopic(t, srv.addr(), "oc", 3, nil)
	c := b.NewConn("test")
	defer c.Close()

	// A brand-new group: offset -1 and no error, at every version.
	for v := int16(0); v <= 10; v++ {
		f := kmsg.NewPtrOffsetFetchRequest()
		f.Version = v
		if v < 8 {
			f.Group = "fresh"
			f.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "oc", Partitions: []int32{0, 1}}}
		} else {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = "fresh"
			rt := kmsg.NewOffsetFetchRequestGroupTopic()
			rt.Topic, rt.TopicID, rt.Partitions = "oc", b.lookup("oc").id, []int32{0, 1}
			rg.Topics = append(rg.Topics, rt)
			f.Groups = append(f.Groups, rg)
		}
		r := mustCall[*kmsg.OffsetFetchResponse](t, c, f)
		if v < 8 {
			if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 2 || r.Topics[0].Partitions[0].Offset != -1 || r.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("v%d fresh group: %+v", v, r)
			}
		} else if g := r.Groups[0]; g.ErrorCode != 0 || g.Topics[0].Partitions[1].Offset != -1 || g.Topics[0].Partitions[1].ErrorCode != 0 {
			t.Fatalf("v%d fresh group: %+v", v, g)
		}
	}

	// Simple (generation -1) commits create the group.
	commit := func(group string, v int16, offs map[int32]int64) *kmsg.OffsetCommitResponse {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = v, group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = "oc", b.lookup("oc").id
		for p, o := range offs {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.Metadata = p, o, kmsg.StringPtr("md")
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return mustCall[*kmsg.OffsetCommitResponse](t, c, req)
	}
	if r := commit("g1", 8, map[int32]int64{0: 5, 1: 7}); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	if r := commit("g2", 10, map[int32]int64{2: 9}); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	if r := commit("g1", 8, map[int32]int64{7: 1}); r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("commit to a missing partition: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	// v8 multi-group fetch of everything committed.
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version = 9
	for _, g := range []string{"g1", "g2"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		f.Groups = append(f.Groups, rg)
	}
	check := func(c *Conn) {
		t.Helper()
		r := mustCall[*kmsg.OffsetFetchResponse](t, c, f)
		g1, g2 := r.Groups[0], r.Groups[1]
		if len(g1.Topics) != 1 || len(g1.Topics[0].Partitions) != 2 || g1.Topics[0].Partitions[0].Offset != 5 || g1.Topics[0].Partitions[1].Offset != 7 ||
			*g1.Topics[0].Partitions[0].Metadata != "md" || len(g2.Topics) != 1 || g2.Topics[0].Partitions[0].Offset != 9 {
			t.Fatalf("fetch all: %+v", r.Groups)
		}
	}
	check(c)
	lag := b.GroupLag()
	if len(lag) != 3 || lag[0].Group != "g1" || lag[0].Committed != 5 || lag[0].End != 0 || lag[0].Lag != 0 {
		t.Fatalf("lag: %+v", lag)
	}

	// OffsetDelete, then both survive a clean restart...
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g1"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "oc", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 1}}}}
	if r := mustCall[*kmsg.OffsetDeleteResponse](t, c, od); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", r)
	}
	commit("g1", 8, map[int32]int64{1: 7}) // put it back for the check
	srv.close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := groupBroker(t, dir)
	c2 := b2.NewConn("test")
	check(c2)
	// ...and a crash: copy the files of a live broker (what SIGKILL
	// leaves: everything written is in the page cache) and open the copy.
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = "g2", -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "oc", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 2, Offset: 11}}}}
	mustCall[*kmsg.OffsetCommitResponse](t, c2, req)
	crashed := crashCopy(t, dir)
	b3 := groupBroker(t, crashed)
	r := mustCall[*kmsg.OffsetFetchResponse](t, b3.NewConn("test"), f)
	if r.Groups[1].Topics[0].Partitions[0].Offset != 11 {
		t.Fatalf("after a crash g2 is at %d, want 11", r.Groups[1].Topics[0].Partitions[0].Offset)
	}
}

// crashCopy copies dir (a live broker's data directory) to a new directory,
// as a SIGKILL would leave it, minus the lock.
func crashCopy(t testing.TB, dir string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, raw, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// checkFor polls cond until it holds or 20 s pass.
func checkFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestJournalTornTail(t *testing.T) {
	dir := t.TempDir()
	j, err := openJournal(dir, 0, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	<-j.put("a", []byte("1"))
	<-j.put("b", []byte("2"))
	<-j.put("a", []byte("3"))
	<-j.put("b", nil)
	if err := j.close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, journalFileName)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := appendJournalRecord(nil, "c", []byte("4"))
	if _, err := f.Write(torn[:len(torn)-1]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	j2, err := openJournal(dir, 0, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer j2.close()
	got := j2.snapshot()
	if len(got) != 1 || got[0].key != "a" || string(got[0].val) != "3" {
		t.Fatalf("after torn tail: %+v", got)
	}
}

func TestJournalCompacts(t *testing.T) {
	dir := t.TempDir()
	j, err := openJournal(dir, 0, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	j.compactMin = 4 << 10
	for i := 0; i < 2000; i++ {
		if err := <-j.put("k"+string(rune('a'+i%3)), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(filepath.Join(dir, journalFileName))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 8<<10 {
		t.Fatalf("journal is %d bytes after compactions, want under 8 KiB", st.Size())
	}
	if err := j.close(); err != nil {
		t.Fatal(err)
	}
	j2, err := openJournal(dir, 0, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer j2.close()
	got := j2.snapshot()
	if len(got) != 3 || string(got[0].val) != "1998" || string(got[1].val) != "1999" || string(got[2].val) != "1997" {
		t.Fatalf("after compaction: %+v", got)
	}
}

func TestGroupOffsetsExpire(t *testing.T) {
	b := groupBroker(t, t.TempDir(), func(c *Config) { c.OffsetsRetention = 300 * time.Millisecond })
	srv := startServer(t, b)
	createTopic(t, srv.addr(), "ex", 1, nil)
	c := b.NewConn("test")
	defer c.Close()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = "standalone", -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "ex", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3}}}}
	mustCall[*kmsg.OffsetCommitResponse](t, c, req)
	if len(b.GroupLag()) != 1 {
		t.Fatal("commit not visible")
	}
	checkFor(t, func() bool { return len(b.GroupLag()) == 0 && b.groups.lock("standalone", false) == nil })
}

func TestGroupStaticFencingAndOffsetDelete(t *testing.T) {
	b := groupBroker(t, t.TempDir())
	srv := startServer(t, b)
	createTopic(t, srv.addr(), "sf", 1, nil)
	c := b.NewConn("test")
	defer c.Close()
	md := kmsg.NewConsumerMemberMetadata()
	md.Topics = []string{"sf"}
	req := joinReq("sg", "", 9, "range")
	req.Protocols[0].Metadata = md.AppendTo(nil)
	req.InstanceID = kmsg.StringPtr("inst")
	j1 := mustCall[*kmsg.JoinGroupResponse](t, c, req)
	if j1.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(j1.ErrorCode))
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation, sync.InstanceID = "sg", j1.MemberID, j1.Generation, req.InstanceID
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: j1.MemberID, MemberAssignment: []byte("x")}}
	mustCall[*kmsg.SyncGroupResponse](t, c, sync)
	// The instance restarts: same assignment, new member id, no rebalance;
	// the old member id is fenced.
	j2 := mustCall[*kmsg.JoinGroupResponse](t, c, req)
	if j2.ErrorCode != 0 || j2.MemberID == j1.MemberID || j2.Generation != j1.Generation || !j2.SkipAssignment {
		t.Fatalf("static rejoin: %v member %s gen %d skip %v", kerr.ErrorForCode(j2.ErrorCode), j2.MemberID, j2.Generation, j2.SkipAssignment)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version = 4
	hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = "sg", j1.MemberID, j1.Generation, req.InstanceID
	if r := mustCall[*kmsg.HeartbeatResponse](t, c, hb); r.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("old member heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	sync.MemberID, sync.GroupAssignment = j2.MemberID, nil
	if s := mustCall[*kmsg.SyncGroupResponse](t, c, sync); s.ErrorCode != 0 || string(s.MemberAssignment) != "x" {
		t.Fatalf("new member sync: %v %q", kerr.ErrorForCode(s.ErrorCode), s.MemberAssignment)
	}
	// Offsets of a subscribed topic cannot be deleted while members exist.
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version = 7
	oc.Group, oc.Generation, oc.MemberID, oc.InstanceID = "sg", j2.Generation, j2.MemberID, req.InstanceID
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "sf", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if r := mustCall[*kmsg.OffsetCommitResponse](t, c, oc); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	oc.MemberID = j1.MemberID
	if r := mustCall[*kmsg.OffsetCommitResponse](t, c, oc); r.Topics[0].Partitions[0].ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("commit by the fenced member: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "sg"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "sf", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	if r := mustCall[*kmsg.OffsetDeleteResponse](t, c, od); r.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code {
		t.Fatalf("offset delete of a subscribed topic: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"sg"}
	if r := mustCall[*kmsg.DeleteGroupsResponse](t, c, del); r.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete of a live group: %v", kerr.ErrorForCode(r.Groups[0].ErrorCode))
	}
	// Admin removal by instance id (KIP-345), then the group can go.
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version = 4
	lv.Group, lv.Members = "sg", []kmsg.LeaveGroupRequestMember{{InstanceID: req.InstanceID}}
	if r := mustCall[*kmsg.LeaveGroupResponse](t, c, lv); r.Members[0].ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.Members[0].ErrorCode))
	}
	if r := mustCall[*kmsg.DeleteGroupsResponse](t, c, del); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(r.Groups[0].ErrorCode))
	}
	if len(b.GroupLag()) != 0 {
		t.Fatal("deleted group's offsets remain")
	}
}

func TestGroupIDWithSeparator(t *testing.T) {
	dir := t.TempDir()
	b := groupBroker(t, dir)
	srv := startServer(t, b)
	createTopic(t, srv.addr(), "sep", 1, nil)
	name := "odd\x00group\x00name"
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = name, -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "sep", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 8}}}}
	mustCall[*kmsg.OffsetCommitResponse](t, b.NewConn("test"), req)
	srv.close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := groupBroker(t, dir)
	if lag := b2.GroupLag(); len(lag) != 1 || lag[0].Group != name || lag[0].Topic != "sep" || lag[0].Committed != 8 {
		t.Fatalf("after restart: %+v", lag)
	}
}

// FuzzJournalRecord: decoding arbitrary bytes never panics, and whatever
// decodes re-encodes to the same bytes.
func FuzzJournalRecord(f *testing.F) {
	f.Add(appendJournalRecord(nil, "o\x00g\x00t\x000", []byte(`{"offset":1}`)))
	f.Add(appendJournalRecord(nil, "g\x00x", nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		key, val, n, ok := decodeJournalRecord(b)
		if !ok {
			return
		}
		if again := appendJournalRecord(nil, key, val); string(again) != string(b[:n]) {
			t.Fatalf("round trip: % x -> % x", b[:n], again)
		}
	})
}

func TestJournalPolicies(t *testing.T) {
	for _, pol := range []storage.FsyncPolicy{storage.FsyncAlways, storage.FsyncInterval, storage.FsyncNever} {
		t.Run(pol.String(), func(t *testing.T) {
			dir := t.TempDir()
			j, err := openJournal(dir, pol, 10*time.Millisecond, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			var waits []<-chan error
			for i := 0; i < 50; i++ {
				waits = append(waits, j.put(fmt.Sprint("k", i%5), []byte(fmt.Sprint(i))))
			}
			for _, w := range waits {
				if err := <-w; err != nil {
					t.Fatal(err)
				}
			}
			// What was acknowledged is in the file without a clean close.
			raw, err := os.ReadFile(filepath.Join(dir, journalFileName))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for off := 0; off < len(raw); n++ {
				_, _, sz, ok := decodeJournalRecord(raw[off:])
				if !ok {
					t.Fatalf("record %d at %d does not decode", n, off)
				}
				off += sz
			}
			if n != 50 {
				t.Fatalf("%d records in the file, want 50", n)
			}
			if err := j.close(); err != nil {
				t.Fatal(err)
			}
			if err := <-j.put("late", []byte("x")); !errors.Is(err, errJournalClosed) {
				t.Fatalf("put after close: %v", err)
			}
		})
	}
}
