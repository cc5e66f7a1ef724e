package webui

import (
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate-kafka/tollgate/audit"
)

// LiveFilter is the live page's filter form (the tap's filters).
type LiveFilter struct {
	API      string `json:"api"`
	APINot   string `json:"api_not"`
	Topic    string `json:"topic"`
	Client   string `json:"client"`
	Listener string `json:"listener"`
}

func (c *Console) livePage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := LiveFilter{API: q.Get("api"), APINot: q.Get("api_not"), Topic: q.Get("topic"), Client: q.Get("client"), Listener: q.Get("listener")}
	var err error
	if _, ferr := audit.FilterFromQuery(q); ferr != nil {
		err = fmt.Errorf("%w: %v", errBadRequest, ferr)
	}
	c.render(w, r, "live", "Live traffic", map[string]any{"Filter": f, "Query": r.URL.RawQuery}, err)
}

// liveKeepalive is how often an idle stream gets a comment line, so
// proxies keep it open and a gone browser is noticed.
const liveKeepalive = 15 * time.Second

// liveEvents streams audit records as Server-Sent Events, filtered like
// /tap (api, api_not, topic, client, listener). A filter on what a request
// is (api, topic, client) shows requests only: connection events carry
// none of those, and the trail's filter selects them by listener alone
// (configs.AuditFilter), so ?api=Produce would otherwise stream every
// connect and disconnect too.
func (c *Console) liveEvents(w http.ResponseWriter, r *http.Request) {
	if c.opts.Tap == nil {
		http.Error(w, "the live tap is not available", http.StatusServiceUnavailable)
		return
	}
	q := r.URL.Query()
	requestsOnly := q.Get("api") != "" || q.Get("topic") != "" || q.Get("client") != "" || q.Get("client_id") != ""
	f, err := audit.FilterFromQuery(q)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc := http.NewResponseController(w)
	ch, cancel := c.opts.Tap.Subscribe(f)
	defer cancel()
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": tollgate live\n\n")
	_ = rc.Flush()
	keep := time.NewTicker(liveKeepalive)
	defer keep.Stop()
	buf := make([]byte, 0, 4096)
	for {
		select {
		case rec, ok := <-ch:
			if !ok {
				return
			}
			if !requestsOnly || rec.IsRequest() {
				buf = append(buf[:0], "data: "...)
				buf = append(rec.AppendJSON(buf, true), "\n\n"...)
				// A stalled browser must not hold the subscription; the trail
				// drops what it cannot take meanwhile.
				_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
				if _, err := w.Write(buf); err != nil {
					return
				}
			}
			if len(ch) == 0 { // the backlog is written (a skipped event ends it too)
				_ = rc.Flush()
			}
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
			_ = rc.Flush()
		case <-r.Context().Done():
			return
		case <-c.opts.Stop:
			return
		case <-c.stop:
			return
		}
	}
}
