package metrics

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/lograte"
)

// TapSource is where /tap gets its live records; *audit.Trail
// implements it.
type TapSource interface {
	Subscribe(f *audit.Filter) (<-chan *audit.Record, func())
}

var _ TapSource = (*audit.Trail)(nil)

// AdminServer is the admin HTTP server:
//
//	/metrics  Prometheus text format from the registry
//	/healthz  200 while the process serves HTTP at all
//	/readyz   200 when ready() returns nil (upstream reachable, or the
//	          built-in broker recovered), else 503 with the reason
//	/tap      newline-delimited JSON audit records, live, filtered by the
//	          query (listener, api, api_not, topic, client; see
//	          audit.FilterFromQuery), until the client goes away
//	/ui/      the web console (package webui), when mounted
//
// It binds in NewAdmin, so Addr is known before Start.
type AdminServer struct {
	ln    net.Listener
	srv   *http.Server
	mux   *http.ServeMux
	allow func(*http.Request) bool // nil: no authentication
	hosts hostCheck                // which Host headers are served (DNS rebinding)
	// refused counts refused requests by reason (CountRefusals; nil: not
	// counted). Set before Start, then read only.
	refused *prometheus.CounterVec
	noisy   *lograte.Logger // rate limit for refusals, which any client can cause (owned; closed by Shutdown)
	tls     *tls.Config     // nil: plain HTTP
	ready   func() error
	tap     TapSource
	log     *slog.Logger

	// stop ends /tap streams at Shutdown: http.Server.Shutdown waits for
	// handlers to return, and a stream never would on its own.
	stopOnce sync.Once
	stop     chan struct{}
	served   chan struct{}
}

// tapFlushInterval bounds how long a /tap record waits in the response
// buffer while more records keep arriving.
const tapFlushInterval = 100 * time.Millisecond

// NewAdmin binds addr and prepares the server. ready may be nil (always
// ready); tap may be nil (/tap answers 503).
func NewAdmin(addr string, reg prometheus.Gatherer, ready func() error, tap TapSource) (*AdminServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listen %s: %w", addr, err)
	}
	a := &AdminServer{ln: ln, ready: ready, tap: tap, log: slog.Default(), stop: make(chan struct{}), served: make(chan struct{})}
	a.hosts.listen, _, _ = net.SplitHostPort(addr)
	a.noisy = lograte.New(a.log, lograte.Options{})
	mux := http.NewServeMux()
	a.mux = mux
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.HandleFunc("GET /tap", a.tapHandler)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "tollgate admin: /metrics /healthz /readyz /tap?api=&topic=&client=&listener= /ui/ (web console, when enabled)")
	})
	a.srv = &http.Server{
		Handler:           http.HandlerFunc(a.serve),
		ReadHeaderTimeout: 10 * time.Second,
		// No WriteTimeout: /tap streams for as long as the client reads.
	}
	return a, nil
}

// Addr is the bound address (useful with port 0).
func (a *AdminServer) Addr() net.Addr { return a.ln.Addr() }

// Mount serves h for pattern (an http.ServeMux pattern); call before
// Start. The web console is mounted at /ui/ this way.
func (a *AdminServer) Mount(pattern string, h http.Handler) { a.mux.Handle(pattern, h) }

// Protect makes every path but /healthz and /readyz (probes) require
// allow(r); call before Start.
func (a *AdminServer) Protect(allow func(*http.Request) bool) { a.allow = allow }

// AllowHosts adds names a request's Host header may carry, besides the
// listen host, loopback names and IP addresses (see hostCheck); call
// before Start. admin.allowed_hosts in the configuration.
func (a *AdminServer) AllowHosts(names []string) { a.hosts.extra = names }

// Refusal reasons of tollgate_admin_refused_total.
const (
	RefusedHost   = "host"   // a Host that is not a name of the admin server
	RefusedAuth   = "auth"   // missing or wrong credentials
	RefusedAction = "action" // a console action without same-origin proof (webui)
)

// CountRefusals counts refused requests in reg as
// tollgate_admin_refused_total{reason}; call before Start.
func (a *AdminServer) CountRefusals(reg prometheus.Registerer) {
	a.refused = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "admin_refused_total",
		Help: "Admin server requests refused: host (not a name of the server), auth (credentials), action (console action without same-origin proof)."},
		[]string{"reason"}))
	for _, r := range []string{RefusedHost, RefusedAuth, RefusedAction} {
		a.refused.WithLabelValues(r)
	}
}

// Refused counts one refused request (see CountRefusals) and logs it,
// rate-limited per reason (package lograte), with attrs; safe for
// concurrent use. The console reports its refused actions through it.
func (a *AdminServer) Refused(reason string, r *http.Request, msg string, attrs ...any) {
	if a.refused != nil {
		a.refused.WithLabelValues(reason).Inc()
	}
	a.noisy.Warn("admin_"+reason, r.RemoteAddr, msg, append([]any{"host", r.Host, "path", r.URL.Path}, attrs...)...)
}

// UseTLS serves HTTPS with tc; call before Start.
func (a *AdminServer) UseTLS(tc *tls.Config) { a.tls = tc }

// Stopping is closed when Shutdown begins, so that live streams (the
// console's live view) can end.
func (a *AdminServer) Stopping() <-chan struct{} { return a.stop }

func (a *AdminServer) serve(w http.ResponseWriter, r *http.Request) {
	probe := r.URL.Path == "/healthz" || r.URL.Path == "/readyz"
	if !probe && !a.hosts.allowed(r.Host) {
		a.Refused(RefusedHost, r, "admin request refused: unknown Host (DNS rebinding?); add the name to admin.allowed_hosts if it is yours")
		http.Error(w, fmt.Sprintf("host %q is not a name of this admin server (add it to admin.allowed_hosts)", r.Host),
			http.StatusMisdirectedRequest)
		return
	}
	if a.allow != nil && !probe && !a.allow(r) {
		a.Refused(RefusedAuth, r, "admin request refused: missing or wrong credentials")
		w.Header().Set("WWW-Authenticate", `Basic realm="tollgate admin", charset="UTF-8"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	a.mux.ServeHTTP(w, r)
}

// Start serves in a goroutine until Shutdown.
func (a *AdminServer) Start() {
	ln := a.ln
	if a.tls != nil {
		ln = tls.NewListener(ln, a.tls)
	}
	go func() {
		defer close(a.served)
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("admin server stopped", "addr", a.ln.Addr().String(), "err", err)
		}
	}()
}

// Shutdown ends live streams, then shuts the HTTP server down gracefully
// within ctx; requests still running when ctx ends have their connections
// closed (http.Server.Close), so a handler that does not return cannot
// hold the shutdown.
func (a *AdminServer) Shutdown(ctx context.Context) error {
	a.stopOnce.Do(func() { close(a.stop); a.noisy.Close() })
	defer a.ln.Close() // for a server shut down before Start
	if err := a.srv.Shutdown(ctx); err != nil {
		a.srv.Close()
		return fmt.Errorf("admin shutdown: %w", err)
	}
	return nil
}

func (a *AdminServer) readyz(w http.ResponseWriter, _ *http.Request) {
	if a.ready != nil {
		if err := a.ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	fmt.Fprintln(w, "ready")
}

func (a *AdminServer) tapHandler(w http.ResponseWriter, r *http.Request) {
	if a.tap == nil {
		http.Error(w, "the live tap is not available", http.StatusServiceUnavailable)
		return
	}
	f, err := audit.FilterFromQuery(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	flusher, _ := w.(http.Flusher)
	rc := http.NewResponseController(w)
	ch, cancel := a.tap.Subscribe(f)
	defer cancel()
	// The write deadline set below outlives the handler on a kept-alive
	// connection: clear it for the next request.
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush() // the client learns the stream is open before the first record
	}
	buf := make([]byte, 0, 4096)
	var flushTimer <-chan time.Time
	pending := false
	for {
		select {
		case rec, ok := <-ch:
			if !ok {
				return
			}
			buf = append(rec.AppendJSON(buf[:0], true), '\n')
			// A stalled client must not hold the subscription forever;
			// the trail drops what it cannot take meanwhile.
			_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := w.Write(buf); err != nil {
				return
			}
			if len(ch) == 0 {
				if flusher != nil {
					flusher.Flush()
				}
				pending, flushTimer = false, nil
			} else if !pending {
				pending, flushTimer = true, time.After(tapFlushInterval)
			}
		case <-flushTimer:
			if flusher != nil {
				flusher.Flush()
			}
			pending, flushTimer = false, nil
		case <-r.Context().Done():
			return
		case <-a.stop:
			return
		}
	}
}

// AdminAuth returns the check Protect needs: a request passes with
// "Authorization: Bearer TOKEN" (token non-empty) or with basic
// credentials user:pass (user non-empty). Comparisons are constant-time.
func AdminAuth(token, user, pass string) func(*http.Request) bool {
	eq := func(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
	return func(r *http.Request) bool {
		h := r.Header.Get("Authorization")
		if t, ok := strings.CutPrefix(h, "Bearer "); ok && token != "" {
			return eq(t, token)
		}
		if u, p, ok := r.BasicAuth(); ok && user != "" {
			return eq(u, user) && eq(p, pass)
		}
		return false
	}
}
