package proxy

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
)

// clusterView is what single-port routing knows of the upstream cluster:
// partition leaders, topic ids, and the coordinators it has looked up.
// Broker addresses are the Server's node registry (discovery).
//
// Ownership: one per Server, shared by every single-port session; all
// fields behind mu. Its own upstream connection (conn) carries the
// Metadata and FindCoordinator requests it sends, so a lookup never waits
// behind a session's long-poll Fetch.
type clusterView struct {
	srv *Server

	mu          sync.Mutex
	leaders     map[string]map[int32]int32 // topic → partition → leader
	ids         map[[16]byte]string        // topic id → name
	coords      *coordCache                // bounded (coordCacheSize), least recently used evicted
	lastRefresh time.Time
	// stale is set by an error that says the leaders may be out of date
	// (invalidate): the next partition-leader routing asks the cluster
	// again, while every session keeps routing on what the view knew, so
	// one client's stale answer (which it can cause at will) does not
	// leave the others without leaders.
	stale   bool
	brokers []int32 // the brokers of the latest Metadata answer (the live cluster)
	next    int     // round robin over brokers for AnyBroker requests
	// controller is the latest Metadata answer's controller id (-1:
	// unknown). A KRaft broker forwards controller requests itself and
	// names a random live broker here (KIP-590); a ZooKeeper-era
	// controller, or kfake, answers NOT_CONTROLLER from any other broker.
	controller int32

	// rt is held by one lookup at a time (lookups are rare); it guards
	// conn and findMax. A channel, not a mutex, so a waiter gives up at
	// its own deadline (lockRT).
	rt   chan struct{}
	conn *brokerConn // the view's own upstream connection
	// findMax is the highest FindCoordinator version conn's broker
	// offers (its ApiVersions answer), learned on each dial.
	findMax int16
}

type coordKey struct {
	kind int8 // 0 group, 1 transaction (FindCoordinator KeyType)
	key  string
}

// viewMinRefresh spaces forced metadata refreshes (a burst of
// NOT_LEADER_OR_FOLLOWER answers triggers one).
const viewMinRefresh = 200 * time.Millisecond

func newClusterView(s *Server) *clusterView {
	return &clusterView{srv: s, leaders: map[string]map[int32]int32{}, ids: map[[16]byte]string{}, coords: newCoordCache(coordCacheSize), controller: -1, rt: make(chan struct{}, 1)}
}

// learnMetadata records the leaders, topic ids and brokers of an upstream
// Metadata response (the view's own refreshes and clients' requests).
func (v *clusterView) learnMetadata(resp *kmsg.MetadataResponse) {
	for _, b := range resp.Brokers {
		v.srv.learnBroker(b.NodeID, b.Host, b.Port)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if resp.ControllerID >= 0 {
		v.controller = resp.ControllerID
	}
	if len(resp.Brokers) > 0 {
		v.brokers = v.brokers[:0]
		for _, b := range resp.Brokers {
			v.brokers = append(v.brokers, b.NodeID)
		}
		slices.Sort(v.brokers)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		m := make(map[int32]int32, len(t.Partitions))
		for _, p := range t.Partitions {
			m[p.Partition] = p.Leader
		}
		v.leaders[*t.Topic] = m
		if t.TopicID != ([16]byte{}) {
			v.ids[t.TopicID] = *t.Topic
		}
	}
}

// controllerNode returns the controller; ok false when unknown.
func (v *clusterView) controllerNode() (int32, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.controller, v.controller >= 0
}

// forgetController drops a controller that answered NOT_CONTROLLER.
func (v *clusterView) forgetController() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.controller = -1
	v.lastRefresh = time.Time{}
}

// leader returns the leader of topic/partition; ok false when unknown.
func (v *clusterView) leader(topic string, partition int32) (int32, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	n, ok := v.leaders[topic][partition]
	return n, ok && n >= 0
}

// topicName resolves a topic id (Fetch v13+).
func (v *clusterView) topicName(id [16]byte) (string, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	t, ok := v.ids[id]
	return t, ok
}

// refresh reloads all topic metadata, at most once per viewMinRefresh.
func (v *clusterView) refresh(ctx context.Context) error {
	v.mu.Lock()
	if time.Since(v.lastRefresh) < viewMinRefresh {
		v.mu.Unlock()
		return nil
	}
	v.lastRefresh = time.Now()
	v.mu.Unlock()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12) // topic ids (v10+) for Fetch v13+ routing
	resp, err := v.roundTrip(ctx, req)
	if err != nil {
		return fmt.Errorf("cluster view metadata: %w", err)
	}
	md := resp.(*kmsg.MetadataResponse)
	v.learnMetadata(md)
	v.forgetTopicsNotIn(md)
	return nil
}

// forgetTopicsNotIn drops the leaders of topics a whole-cluster Metadata
// answer no longer lists (deleted), and clears stale.
func (v *clusterView) forgetTopicsNotIn(md *kmsg.MetadataResponse) {
	listed := make(map[string]bool, len(md.Topics))
	for _, t := range md.Topics {
		if t.Topic != nil {
			listed[*t.Topic] = true
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for topic := range v.leaders {
		if !listed[topic] {
			delete(v.leaders, topic)
		}
	}
	v.stale = false
}

// isStale reports whether an error has said the leaders may be out of
// date since the last refresh.
func (v *clusterView) isStale() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.stale
}

// invalidate acts on what a retriable error says is stale: the leaders
// are marked stale (kept until the refresh replaces them), a coordinator
// is forgotten; the next routing of that kind asks the cluster again.
func (v *clusterView) invalidate(leaders bool, coord *coordKey) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if leaders {
		v.lastRefresh = time.Time{}
		v.stale = true
	}
	if coord != nil {
		v.coords.forget(*coord)
	}
}

// liveBrokers lists the brokers of the latest Metadata answer, or every
// node discovery has seen before the first one (the node registry
// never forgets a node, so a broker that left would stay in it). With
// no node seen yet (a client connected in the moment between the
// listener opening and the first discovery, or that discovery failed
// because the upstream was down) it runs a discovery itself: otherwise
// the client's first ApiVersions found no broker to ask and its
// connection was closed before any answer until the next refresh, which
// kgo's producer does not retry (it failed records).
func (v *clusterView) liveBrokers() []int32 {
	v.mu.Lock()
	live := slices.Clone(v.brokers)
	v.mu.Unlock()
	if len(live) > 0 {
		return live
	}
	if nodes := v.srv.nodes.list(); len(nodes) > 0 {
		return nodes
	}
	v.srv.discoverFirst()
	return v.srv.nodes.list()
}

// anyBroker picks a broker for a request any broker can answer.
func (v *clusterView) anyBroker() (int32, error) {
	nodes := v.liveBrokers()
	if len(nodes) == 0 {
		return 0, fmt.Errorf("no upstream broker known yet")
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.next++
	return nodes[v.next%len(nodes)], nil
}

// roundTrip sends req on the view's own upstream connection and waits.
func (v *clusterView) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if err := v.lockRT(ctx); err != nil {
		return nil, err
	}
	defer v.unlockRT()
	if err := v.connectLocked(ctx); err != nil {
		return nil, err
	}
	return v.sendLocked(ctx, req)
}

// lockRT takes rt, or gives up when ctx ends first.
func (v *clusterView) lockRT(ctx context.Context) error {
	select {
	case v.rt <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the cluster view's upstream connection: %w", ctx.Err())
	}
}

func (v *clusterView) unlockRT() { <-v.rt }

// connectLocked dials the view's connection when it has none (or it
// failed) and learns which FindCoordinator versions that broker offers.
// The caller holds rt.
func (v *clusterView) connectLocked(ctx context.Context) error {
	if v.conn != nil && !v.conn.isFailed() {
		return nil
	}
	c, _, err := v.srv.dialUpstream(ctx, -1)
	if err != nil {
		return err
	}
	v.conn = newBrokerConn(-1, c, "tollgate-single-port")
	v.findMax = v.findCoordinatorMaxLocked(ctx)
	return nil
}

// findCoordinatorMaxLocked asks the view's broker for its ApiVersions
// (v0, which every broker answers) and returns its highest
// FindCoordinator version; 3 when it cannot tell, which every supported
// broker (Kafka 3.1+) takes.
func (v *clusterView) findCoordinatorMaxLocked(ctx context.Context) int16 {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0)
	r, err := v.sendLocked(ctx, req)
	if err != nil {
		return 3
	}
	for _, k := range r.(*kmsg.ApiVersionsResponse).ApiKeys {
		if k.ApiKey == apis.FindCoordinator {
			return k.MaxVersion
		}
	}
	return 3
}

// sendLocked sends req on the view's connection and waits for its
// answer. The caller holds rt.
//
// A caller whose deadline passed while it waited for rt sends nothing
// (the connection stays up for the others); one whose deadline passes
// during the write or the wait closes the connection, which ends both.
func (v *clusterView) sendLocked(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, v.conn.close)
	defer stop()
	done := make(chan struct{})
	call := &partCall{req: req, done: func() { close(done) }}
	if queued, err := v.conn.send(call, true); err != nil {
		if queued {
			<-done
		}
		return nil, err
	}
	select {
	case <-done:
		return call.resp, call.err
	case <-ctx.Done():
		v.conn.close()
		return nil, ctx.Err()
	}
}

func (v *clusterView) close() {
	v.rt <- struct{}{}
	defer v.unlockRT()
	if v.conn != nil {
		v.conn.close()
	}
}

// list returns the known node ids, sorted.
func (r *nodeRegistry) list() []int32 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]int32, 0, len(r.addrs))
	for n := range r.addrs {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
