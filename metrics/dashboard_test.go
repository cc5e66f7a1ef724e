package metrics

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// dashboardPath is the Grafana dashboard shipped with the example configs.
const dashboardPath = "../configs/grafana-dashboard.json"

var (
	metricNameRE = regexp.MustCompile(`\b(?:tollgate|go|process)_[a-z0-9_]+\b`)
	byRE         = regexp.MustCompile(`\bby \(([^)]*)\)`)
)

// dashboardExprs returns every PromQL expression in the dashboard: panel
// targets and templating queries.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	var exprs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			exprs = append(exprs, v.Definition)
		}
	}
	return exprs
}

// callEveryHook makes one call to each hook, so that every vector has a
// series and every family is exported.
func callEveryHook(m *Metrics) {
	m.ConnOpened("default")
	m.ConnClosed("default", "client_closed")
	m.Request("default", 0, OutcomeOK, time.Millisecond, 10, 10)
	m.UpstreamDial(0, time.Millisecond, errors.New("refused"))
	m.UpstreamConns(1, 0)
	m.Rewrite(3)
	m.Malformed("frame_too_large")
	m.Denied("r")
	m.Throttled("r", time.Second)
	m.PolicyReload(true)
	m.AuditWritten()
	m.AuditDropped("queue_full")
	m.FsyncObserved(time.Millisecond)
	m.BrokerBytes(1, 1)
	m.WatchBroker(fakeBroker{})
}

// TestDashboardMetricsExist checks that every metric the Grafana
// dashboard queries is exported, with every label it groups by.
func TestDashboardMetricsExist(t *testing.T) {
	reg := prometheus.NewRegistry()
	callEveryHook(New(reg))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	// resolve maps a queried name (possibly a histogram's _bucket, _sum
	// or _count) to its family.
	resolve := func(name string) *dto.MetricFamily {
		if f := byName[name]; f != nil {
			return f
		}
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suf); ok {
				if f := byName[base]; f != nil && f.GetType() == dto.MetricType_HISTOGRAM {
					return f
				}
			}
		}
		return nil
	}
	exprs := dashboardExprs(t)
	if len(exprs) < 20 {
		t.Fatalf("found %d expressions in %s; the dashboard looks truncated", len(exprs), dashboardPath)
	}
	seen := 0
	for _, e := range exprs {
		names := metricNameRE.FindAllString(e, -1)
		if len(names) == 0 {
			t.Errorf("expression queries no tollgate, go or process metric: %s", e)
		}
		labels := map[string]bool{"le": true, "instance": true, "job": true}
		for _, n := range names {
			f := resolve(n)
			if f == nil {
				t.Errorf("dashboard queries %s, which the registry does not export (in %s)", n, e)
				continue
			}
			seen++
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = true
				}
			}
		}
		for _, m := range byRE.FindAllStringSubmatch(e, -1) {
			for _, l := range strings.Split(m[1], ",") {
				if l = strings.TrimSpace(l); !labels[l] {
					t.Errorf("dashboard groups by %q, which none of %v has (in %s)", l, names, e)
				}
			}
		}
	}
	// And the other way: every tollgate family is on the dashboard.
	all := strings.Join(exprs, "\n")
	for name := range byName {
		if strings.HasPrefix(name, "tollgate_") && name != "tollgate_broker_series_truncated" && !strings.Contains(all, name) {
			t.Errorf("%s is exported but not on the dashboard", name)
		}
	}
}
