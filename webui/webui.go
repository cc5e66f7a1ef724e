// Package webui is tollgate's web console, served by the admin server
// under /ui/: the gateway's own view (listeners, address map, client
// connections, request rates, denials), live traffic from the audit tap,
// and a Kafka console (topics, messages, groups and lag) — html/template
// pages from embedded files and a little plain JavaScript, no build step.
//
// Every page answers JSON with Accept: application/json. The console is
// read-only unless Options.Actions is set (create a topic, reset a
// group's offsets). Authentication and TLS are the admin server's.
//
// Pages and actions alike reach Kafka through the gateway's own session
// pipeline (the gateway's Options.Kafka dials its in-process console
// listener, proxy/console_listener.go): policy decides, the audit trail
// records and metrics count every request the console makes, under the
// listener configs.ConsoleListener and admin.ui.principal. A refused
// action shows the broker's error, with its ErrorMessage, on the page.
package webui

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/proxy"
)

//go:embed templates/*.html static/*
var files embed.FS

// Gateway is the read-only view of the running gateway; *proxy.Server
// implements it.
type Gateway interface {
	Listeners() []proxy.ListenerInfo
	Connections() []proxy.ConnInfo
	Ready() error
}

var _ Gateway = (*proxy.Server)(nil)

// Tap is the live record stream; *audit.Trail implements it.
type Tap interface {
	Subscribe(f *audit.Filter) (<-chan *audit.Record, func())
}

var _ Tap = (*audit.Trail)(nil)

// Options is what the console shows and how it reaches Kafka.
type Options struct {
	Gateway  Gateway
	Mode     string   // "built-in" or "upstream"
	Upstream []string // upstream bootstrap, in upstream mode
	Metrics  prometheus.Gatherer
	Tap      Tap
	// Policy returns the rules in force and the last reload.
	Policy func() PolicyState
	// Kafka are the client options for the topics and groups pages (nil:
	// those pages say they are unavailable).
	Kafka []kgo.Opt
	// Actions enables the data-changing forms.
	Actions bool
	// Refused, if set, counts and logs (rate-limited) an action refused
	// for want of same-origin proof (the admin server's Refused:
	// tollgate_admin_refused_total{reason="action"}).
	Refused func(r *http.Request, err error)
	// Stop ends live streams (the admin server's shutdown).
	Stop <-chan struct{}
	Log  *slog.Logger
}

// PolicyState is the policy page's data.
type PolicyState struct {
	Default    string     `json:"default"`
	Rules      []RuleInfo `json:"rules"`
	LastReload time.Time  `json:"last_reload"` // zero: never reloaded since start
	LastResult string     `json:"last_result"` // "ok", or the error
	Loaded     time.Time  `json:"loaded"`      // when the rules in force were installed
	// QuotaMode is policy.quotas (off, enforce, upstream); Quotas are the
	// client quotas the gateway keeps (enforce only), by entity.
	QuotaMode string      `json:"quota_mode,omitempty"`
	Quotas    []QuotaInfo `json:"quotas,omitempty"`
}

// QuotaInfo is one quota entity (KIP-546) and its values.
type QuotaInfo struct {
	User     string `json:"user"`      // "" not part of the entity, "<default>" the default
	ClientID string `json:"client_id"` // likewise
	Values   string `json:"values"`    // key=value ...
}

// RuleInfo is one rule as configured, with its hit counters from metrics.
type RuleInfo struct {
	Name      string  `json:"name"`
	Action    string  `json:"action"`
	Match     string  `json:"match"`
	Rate      string  `json:"rate,omitempty"`
	Denied    float64 `json:"denied"`
	Throttled float64 `json:"throttled"`
}

// Console is the /ui/ handler. Close stops its lag sampler.
type Console struct {
	opts Options
	tmpl *template.Template
	mux  *http.ServeMux
	hist *history
	stop chan struct{}
	once sync.Once
	// lastView is when a groups page was last viewed (unix nanos).
	lastView atomic.Int64
}

// New builds the console; call Close when the admin server stops.
func New(opts Options) (*Console, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	tmpl, err := template.New("").Funcs(funcs).ParseFS(files, "templates/*.html")
	if err != nil {
		return nil, err
	}
	c := &Console{opts: opts, tmpl: tmpl, mux: http.NewServeMux(), hist: newHistory(), stop: make(chan struct{})}
	static, _ := fs.Sub(files, "static")
	c.mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServer(http.FS(static))))
	c.mux.HandleFunc("GET /ui/{$}", c.overview)
	c.mux.HandleFunc("GET /ui/live", c.livePage)
	c.mux.HandleFunc("GET /ui/live/events", c.liveEvents)
	c.mux.HandleFunc("GET /ui/topics", c.topics)
	c.mux.HandleFunc("GET /ui/topics/{topic}", c.topic)
	c.mux.HandleFunc("GET /ui/topics/{topic}/messages", c.messages)
	c.mux.HandleFunc("GET /ui/groups", c.groups)
	c.mux.HandleFunc("GET /ui/groups/{group}", c.group)
	c.mux.HandleFunc("GET /ui/policy", c.policy)
	c.mux.HandleFunc("POST /ui/topics", c.createTopic)
	c.mux.HandleFunc("POST /ui/groups/{group}/seek", c.seekGroup)
	go c.sample()
	return c, nil
}

// Close stops the background sampler.
func (c *Console) Close() { c.once.Do(func() { close(c.stop) }) }

func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'")
	c.mux.ServeHTTP(w, r)
}

// page is what every template gets.
type page struct {
	Title   string
	Nav     string
	Actions bool
	Error   string
	Data    any
}

// wantsJSON reports whether the client asked for JSON.
func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json") || r.URL.Query().Get("format") == "json"
}

// render writes data as JSON or through the named template. A non-nil
// err is shown on the page (and as {"error": ...} in JSON) with status.
func (c *Console) render(w http.ResponseWriter, r *http.Request, name, title string, data any, err error) {
	status := http.StatusOK
	p := page{Title: title, Nav: name, Actions: c.opts.Actions, Data: data}
	if err != nil {
		status = statusFor(err)
		p.Error = err.Error()
	}
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		var v any = data
		if err != nil {
			v = map[string]string{"error": err.Error()}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if terr := c.tmpl.ExecuteTemplate(w, name+".html", p); terr != nil {
		c.opts.Log.Error("web console template", "page", name, "err", terr)
	}
}

// errBadRequest marks an error in the request's parameters.
var errBadRequest = errors.New("bad request")

// errNoKafka is the topics and groups pages without a client.
var errNoKafka = errors.New("the Kafka views are not available: the console has no client connection (see the admin.ui notes in the README)")

func statusFor(err error) int {
	switch {
	case errors.Is(err, errBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, errForbidden), authorizationFailed(err):
		return http.StatusForbidden
	case errors.Is(err, errNoKafka):
		return http.StatusServiceUnavailable
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.GroupIDNotFound):
		return http.StatusNotFound
	}
	return http.StatusBadGateway // the cluster refused or failed
}

// authorizationFailed reports whether the broker (or the gateway's policy,
// which refuses like one) denied the request.
func authorizationFailed(err error) bool {
	for _, e := range []error{kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed, kerr.ClusterAuthorizationFailed,
		kerr.TransactionalIDAuthorizationFailed, kerr.DelegationTokenAuthorizationFailed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// kafkaTimeout bounds one page's Kafka requests.
const kafkaTimeout = 10 * time.Second

// admin gives a page a fresh admin client (kgo caches metadata per
// client; a page must show what is there now).
func (c *Console) admin(ctx context.Context) (*kadm.Client, func(), error) {
	if c.opts.Kafka == nil {
		return nil, nil, errNoKafka
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.ClientID("tollgate-webui")}, c.opts.Kafka...)...)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}
