package webui

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tollgate-kafka/tollgate/console"
)

// Sampling: request counters every rateInterval (the overview's rates
// are over the last one or two intervals), group lag every lagInterval
// and on every group page view, kept in memory for the sparklines.
const (
	rateInterval = 5 * time.Second
	lagInterval  = 30 * time.Second
	lagPoints    = 60   // per partition: 30 minutes at lagInterval
	maxSeries    = 5000 // partitions tracked in total; more are not recorded
)

// history holds the samples; safe for concurrent use.
type history struct {
	mu       sync.Mutex
	older    snapshot
	olderAt  time.Time
	newer    snapshot
	newerAt  time.Time
	lag      map[string][]int64 // "group\x00topic\x00partition" -> lag, oldest first
	lagTotal map[string][]int64 // group -> total lag
}

func newHistory() *history {
	return &history{lag: map[string][]int64{}, lagTotal: map[string][]int64{}}
}

// rates returns the older of the last two counter samples.
func (h *history) rates() (snapshot, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.olderAt.IsZero() {
		return h.older, h.olderAt
	}
	return h.newer, h.newerAt
}

func (h *history) addCounters(s snapshot, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.older, h.olderAt = h.newer, h.newerAt
	h.newer, h.newerAt = s, at
}

func lagKey(group, topic string, partition int32) string {
	return fmt.Sprintf("%s\x00%s\x00%d", group, topic, partition)
}

// addLag records one observation of a group's lag.
func (h *history) addLag(d console.GroupDescription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	push := func(m map[string][]int64, k string, v int64) {
		s, ok := m[k]
		if !ok && len(h.lag)+len(h.lagTotal) >= maxSeries {
			return
		}
		s = append(s, v)
		if len(s) > lagPoints {
			s = s[len(s)-lagPoints:]
		}
		m[k] = s
	}
	push(h.lagTotal, d.Group, d.TotalLag)
	for _, p := range d.Partitions {
		push(h.lag, lagKey(d.Group, p.Topic, p.Partition), p.Lag)
	}
}

func (h *history) lagOf(group, topic string, partition int32) []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int64(nil), h.lag[lagKey(group, topic, partition)]...)
}

func (h *history) totalLagOf(group string) []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int64(nil), h.lagTotal[group]...)
}

// sample runs until Close.
func (c *Console) sample() {
	c.hist.addCounters(counters(c.opts.Metrics), time.Now())
	rt := time.NewTicker(rateInterval)
	defer rt.Stop()
	lt := time.NewTicker(lagInterval)
	defer lt.Stop()
	for {
		select {
		case <-c.stop:
			return
		case now := <-rt.C:
			c.hist.addCounters(counters(c.opts.Metrics), now)
		case <-lt.C:
			c.sampleLag()
		}
	}
}

// lagWatch is how long after the last groups page view the sampler
// keeps recording lag: a console nobody looks at sends no requests.
const lagWatch = 10 * time.Minute

// viewed notes a groups page view.
func (c *Console) viewed() { c.lastView.Store(time.Now().UnixNano()) }

// sampleLag records every group's lag once, while someone watches.
func (c *Console) sampleLag() {
	if c.opts.Kafka == nil || time.Since(time.Unix(0, c.lastView.Load())) > lagWatch {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), kafkaTimeout)
	defer cancel()
	adm, done, err := c.admin(ctx)
	if err != nil {
		return
	}
	defer done()
	gs, err := adm.ListGroups(ctx)
	if err != nil {
		return
	}
	if len(gs) == 0 {
		return
	}
	ds, _, err := console.DescribeGroups(ctx, adm, gs.Groups()...)
	if err != nil {
		return
	}
	for _, d := range ds {
		c.hist.addLag(d)
	}
}
