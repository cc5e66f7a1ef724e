package webui

import (
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// maxShownConnections bounds the connections table (a gateway may hold
// ten thousand).
const maxShownConnections = 1000

// Overview is the overview page's data.
type Overview struct {
	Mode        string               `json:"mode"`
	Upstream    []string             `json:"upstream,omitempty"`
	Health      string               `json:"health"` // "ok" or why not
	Listeners   []proxy.ListenerInfo `json:"listeners"`
	Connections []proxy.ConnInfo     `json:"connections"`      // the oldest maxShownConnections
	OpenConns   int                  `json:"connections_open"` // open now, of which Connections shows the oldest
	Requests    []APIRate            `json:"requests"`
	Brokers     []BrokerHealth       `json:"upstream_brokers"` // upstream mode: per node, from the metrics
	Denials     float64              `json:"denials"`
	Throttles   float64              `json:"throttles"`
	RateWindow  float64              `json:"rate_window_seconds"` // 0: no earlier sample yet
}

// BrokerHealth is one upstream node's connections and failed dials
// ("-1" is the bootstrap list).
type BrokerHealth struct {
	Node        string  `json:"node"`
	Connections float64 `json:"connections"`
	DialErrors  float64 `json:"dial_errors"`
}

// APIRate is one API's request count and recent rate.
type APIRate struct {
	API       string  `json:"api"`
	Total     float64 `json:"total"`
	PerSecond float64 `json:"per_second"`
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	o := Overview{Mode: c.opts.Mode, Upstream: c.opts.Upstream, Health: "ok", Requests: []APIRate{},
		Listeners: []proxy.ListenerInfo{}, Connections: []proxy.ConnInfo{}}
	if g := c.opts.Gateway; g != nil {
		o.Listeners, o.Connections = g.Listeners(), g.Connections()
		o.OpenConns = len(o.Connections)
		o.Connections = o.Connections[:min(len(o.Connections), maxShownConnections)]
		if err := g.Ready(); err != nil {
			o.Health = err.Error()
		}
	}
	now := counters(c.opts.Metrics)
	prev, at := c.hist.rates()
	if !at.IsZero() {
		o.RateWindow = time.Since(at).Seconds()
	}
	for api, total := range now.requests {
		ar := APIRate{API: api, Total: total}
		if o.RateWindow > 0 {
			ar.PerSecond = max(0, total-prev.requests[api]) / o.RateWindow
		}
		o.Requests = append(o.Requests, ar)
	}
	sort.Slice(o.Requests, func(i, j int) bool { return o.Requests[i].Total > o.Requests[j].Total })
	o.Denials, o.Throttles = sum(now.denials), sum(now.throttles)
	o.Brokers = brokerHealth(now)
	c.render(w, r, "overview", "Overview", o, nil)
}

// snapshot is the counters the console reads from the metrics registry.
type snapshot struct {
	requests   map[string]float64 // by api
	denials    map[string]float64 // by rule
	throttles  map[string]float64 // by rule
	upConns    map[string]float64 // by broker node
	dialErrors map[string]float64 // by broker node
}

func brokerHealth(s snapshot) []BrokerHealth {
	out := []BrokerHealth{}
	seen := map[string]bool{}
	for _, m := range []map[string]float64{s.upConns, s.dialErrors} {
		for node := range m {
			if !seen[node] {
				seen[node] = true
				out = append(out, BrokerHealth{Node: node, Connections: s.upConns[node], DialErrors: s.dialErrors[node]})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return nodeLess(out[i].Node, out[j].Node) })
	return out
}

// nodeLess orders node ids numerically ("-1" first), others after.
func nodeLess(a, b string) bool {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	if errA != nil || errB != nil {
		return errA == nil || (errB != nil && a < b)
	}
	return x < y
}

// counters gathers the request, denial and throttle counters (by the
// names README.md's metrics table lists).
func counters(g prometheus.Gatherer) snapshot {
	s := snapshot{requests: map[string]float64{}, denials: map[string]float64{}, throttles: map[string]float64{},
		upConns: map[string]float64{}, dialErrors: map[string]float64{}}
	if g == nil {
		return s
	}
	mfs, err := g.Gather()
	if err != nil && len(mfs) == 0 {
		return s
	}
	for _, mf := range mfs {
		var into map[string]float64
		var label string
		switch mf.GetName() {
		case "tollgate_requests_total":
			into, label = s.requests, "api"
		case "tollgate_policy_denials_total":
			into, label = s.denials, "rule"
		case "tollgate_policy_throttles_total":
			into, label = s.throttles, "rule"
		case "tollgate_upstream_connections":
			into, label = s.upConns, "broker"
		case "tollgate_upstream_dial_errors_total":
			into, label = s.dialErrors, "broker"
		default:
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					key = lp.GetValue()
				}
			}
			into[key] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return s
}

func sum(m map[string]float64) float64 {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // a stable order for the float sum
	t := 0.0
	for _, k := range keys {
		t += m[k]
	}
	return t
}
