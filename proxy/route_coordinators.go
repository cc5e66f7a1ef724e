package proxy

import (
	"container/list"
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Coordinator lookups of the cluster view: a request's ids whose
// coordinators are not cached are looked up together, in one
// FindCoordinator round trip naming them all (v4+, KIP-699, Kafka 2.8+),
// or one v3 round trip per id when the upstream offers no v4. The answers
// go into a bounded cache.

// findCoordBatched is the first FindCoordinator version that takes many
// keys (CoordinatorKeys, KIP-699).
const findCoordBatched = 4

// errNotAnswered is a key the upstream's FindCoordinator answer left out.
var errNotAnswered = errors.New("not in the FindCoordinator answer")

// coordCacheSize bounds the coordinators the cluster view remembers
// (README, single-port section): a client can name ids at will, so the
// cache evicts the least recently used entry beyond this many. An evicted
// id is looked up again when next named.
const coordCacheSize = 4096

// coordCache is a least-recently-used map of coordinator lookups.
// Ownership: the clusterView's, used only behind its mu.
type coordCache struct {
	max   int
	order *list.List // of *coordEntry, most recently used first
	items map[coordKey]*list.Element
}

type coordEntry struct {
	k    coordKey
	node int32
}

func newCoordCache(max int) *coordCache {
	return &coordCache{max: max, order: list.New(), items: map[coordKey]*list.Element{}}
}

// get returns k's coordinator and marks it used.
func (c *coordCache) get(k coordKey) (int32, bool) {
	e, ok := c.items[k]
	if !ok {
		return 0, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*coordEntry).node, true
}

// put records k's coordinator, evicting the least recently used entry
// when the cache is full.
func (c *coordCache) put(k coordKey, node int32) {
	if e, ok := c.items[k]; ok {
		e.Value.(*coordEntry).node = node
		c.order.MoveToFront(e)
		return
	}
	c.items[k] = c.order.PushFront(&coordEntry{k: k, node: node})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*coordEntry).k)
	}
}

// forget drops k (its coordinator moved or cannot be reached).
func (c *coordCache) forget(k coordKey) {
	if e, ok := c.items[k]; ok {
		c.order.Remove(e)
		delete(c.items, k)
	}
}

func (c *coordCache) len() int { return c.order.Len() }

// coordinators returns the coordinators of keys (all of kind): cached
// ones from the cache, the others looked up upstream together. failed
// holds each key that could not be found, with why; asked is the
// FindCoordinator round trips sent.
func (v *clusterView) coordinators(ctx context.Context, kind int8, keys []string) (found map[string]int32, failed map[string]error, asked int) {
	found = make(map[string]int32, len(keys))
	var missing []string
	seen := map[string]bool{}
	v.mu.Lock()
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		if n, ok := v.coords.get(coordKey{kind, k}); ok {
			found[k] = n
		} else {
			missing = append(missing, k)
		}
	}
	v.mu.Unlock()
	if len(missing) == 0 {
		return found, nil, 0
	}
	answers, asked, err := v.findCoordinators(ctx, kind, missing)
	failed = map[string]error{}
	for i := range answers {
		a := &answers[i]
		if e := kerr.ErrorForCode(a.ErrorCode); e != nil {
			failed[a.Key] = e
			continue
		}
		v.srv.learnBroker(a.NodeID, a.Host, a.Port)
		found[a.Key] = a.NodeID
	}
	v.mu.Lock()
	for _, k := range missing {
		if n, ok := found[k]; ok {
			v.coords.put(coordKey{kind, k}, n)
		} else if _, ok := failed[k]; !ok {
			failed[k] = errNotAnswered
			if err != nil {
				failed[k] = fmt.Errorf("find coordinator: %w", err)
			}
		}
	}
	v.mu.Unlock()
	return found, failed, asked
}

// findCoordinators sends the FindCoordinator round trips for keys and
// returns the answers got before any error.
func (v *clusterView) findCoordinators(ctx context.Context, kind int8, keys []string) (out []kmsg.FindCoordinatorResponseCoordinator, asked int, err error) {
	handled, asked, out, err := v.findBatched(ctx, kind, keys)
	if handled {
		return out, asked, err
	}
	// One v3 round trip per key, each taking the view's connection on its
	// own, so other sessions' lookups interleave; the request's deadline
	// (ctx) bounds them all.
	for _, k := range keys {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(3)
		req.CoordinatorKey, req.CoordinatorType = k, kind
		r, err := v.roundTrip(ctx, req)
		asked++
		if err != nil {
			return out, asked, err
		}
		resp := r.(*kmsg.FindCoordinatorResponse)
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port, c.ErrorCode = k, resp.NodeID, resp.Host, resp.Port, resp.ErrorCode
		out = append(out, c)
	}
	return out, asked, nil
}

// findBatched looks keys up in one FindCoordinator v4+ round trip.
// handled is false, and nothing sent, when the upstream offers no v4;
// a connection that cannot be made is handled, with nothing asked.
func (v *clusterView) findBatched(ctx context.Context, kind int8, keys []string) (handled bool, asked int, out []kmsg.FindCoordinatorResponseCoordinator, err error) {
	if err := v.lockRT(ctx); err != nil {
		return true, 0, nil, err
	}
	defer v.unlockRT()
	if err := v.connectLocked(ctx); err != nil {
		return true, 0, nil, err
	}
	if v.findMax < findCoordBatched {
		return false, 0, nil, nil
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(min(v.findMax, req.MaxVersion()))
	req.CoordinatorType, req.CoordinatorKeys = kind, keys
	r, err := v.sendLocked(ctx, req)
	if err != nil {
		return true, 1, nil, err
	}
	return true, 1, r.(*kmsg.FindCoordinatorResponse).Coordinators, nil
}

// coordinator returns the node coordinating key, asking the cluster
// (FindCoordinator) when it is not cached.
func (v *clusterView) coordinator(ctx context.Context, k coordKey) (n int32, asked int, err error) {
	found, failed, asked := v.coordinators(ctx, k.kind, []string{k.key})
	if n, ok := found[k.key]; ok {
		return n, asked, nil
	}
	return 0, asked, failed[k.key]
}
