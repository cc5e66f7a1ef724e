package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tollgate-kafka/tollgate/audit"
)

// The per-request hooks run on the data path, where a WithLabelValues
// lookup (hash the values, take a lock, find the series) costs 150-200
// ns each, several per request. These caches resolve each series once
// and then cost an atomic load.

// apiSlots indexes series by API key: known keys by number, every
// unknown key in the last slot.
const apiSlots = 257

func apiSlot(key int16) int {
	if key >= 0 && key < apiSlots-1 && audit.APIName(key) != "unknown" {
		return int(key)
	}
	return apiSlots - 1
}

func slotKey(slot int) int16 {
	if slot == apiSlots-1 {
		return -1
	}
	return int16(slot)
}

type apiSeries struct {
	latency prometheus.Observer
	in, out prometheus.Counter
	rewrite atomic.Pointer[counterBox] // made on first use: most APIs are never rewritten
}

func (m *Metrics) api(key int16) *apiSeries {
	slot := apiSlot(key)
	if s := m.apis[slot].Load(); s != nil {
		return s
	}
	name := APILabel(slotKey(slot))
	s := &apiSeries{
		latency: m.latency.WithLabelValues(name),
		in:      m.bytes.WithLabelValues(name, "in"),
		out:     m.bytes.WithLabelValues(name, "out"),
	}
	m.apis[slot].Store(s) // a racing Store holds the same series
	return s
}

// outcomeSlot indexes outcomes; the last slot is "other".
func outcomeSlot(o string) int {
	for i, x := range outcomes {
		if x == o {
			return i
		}
	}
	return len(outcomes)
}

type counterBox struct{ c prometheus.Counter }

// listenerSeries is one listener's series.
type listenerSeries struct {
	label  string
	active prometheus.Gauge
	total  prometheus.Counter
	reqs   [apiSlots][6]atomic.Pointer[counterBox] // [api][outcome]
}

// listenerCache maps listener names (at most maxListeners of them, the
// cap of the label) to their series; names past the cap share "other".
type listenerCache struct {
	byName sync.Map // string -> *listenerSeries
	other  atomic.Pointer[listenerSeries]
}

func (m *Metrics) listener(name string) *listenerSeries {
	if s, ok := m.lc.byName.Load(name); ok {
		return s.(*listenerSeries)
	}
	label := m.listeners.label(name)
	if label == other {
		if s := m.lc.other.Load(); s != nil {
			return s
		}
		s := m.newListenerSeries(other)
		m.lc.other.CompareAndSwap(nil, s)
		return m.lc.other.Load()
	}
	s, _ := m.lc.byName.LoadOrStore(name, m.newListenerSeries(label))
	return s.(*listenerSeries)
}

func (m *Metrics) newListenerSeries(label string) *listenerSeries {
	return &listenerSeries{
		label:  label,
		active: m.connsActive.WithLabelValues(label),
		total:  m.connsTotal.WithLabelValues(label),
	}
}

func (m *Metrics) requestCounter(l *listenerSeries, key int16, outcome string) prometheus.Counter {
	a, o := apiSlot(key), outcomeSlot(outcome)
	if b := l.reqs[a][o].Load(); b != nil {
		return b.c
	}
	ol := other
	if o < len(outcomes) {
		ol = outcomes[o]
	}
	b := &counterBox{m.requests.WithLabelValues(l.label, APILabel(slotKey(a)), ol)}
	l.reqs[a][o].Store(b)
	return b.c
}

func (m *Metrics) rewriteCounter(key int16) prometheus.Counter {
	a := m.api(key)
	if b := a.rewrite.Load(); b != nil {
		return b.c
	}
	b := &counterBox{m.rewrites.WithLabelValues(APILabel(key))}
	a.rewrite.Store(b)
	return b.c
}
