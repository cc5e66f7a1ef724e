package proxy

// Single-port events: what goes wrong while routing that a client can
// cause or an upstream can, each counted (RouteHooks) and logged
// rate-limited under "single_port_<event>", never one line per event.
const (
	routePartFailed        = "part_failed"           // an upstream broker did not answer a part
	routeCoordinatorLookup = "coordinator_lookup"    // FindCoordinator upstream failed; answered COORDINATOR_NOT_AVAILABLE
	routeViewRefresh       = "view_refresh"          // a Metadata refresh of the cluster view failed
	routeShareLimit        = "share_session_limit"   // a connection asked for more share sessions than the gateway keeps
	routeShareReset        = "share_session_reset"   // an upstream share session failed; the client's session is reset
	routeShareRefused      = "share_request_refused" // a broker refused what a share request asked (INVALID_REQUEST, authorization, ...); the client's session is reset
	routeFetchSessionReset = "fetch_session_reset"   // an upstream fetch session was lost (evicted, wrong epoch); the next fetch there is full
	routeFetchSessionLimit = "fetch_session_limit"   // a client fetch session grew past maxFetchSessionPartitions; dropped
	// routeFindCoordinator is not trouble: each FindCoordinator round
	// trip the cluster view sends upstream, counted (count) and not logged.
	routeFindCoordinator = "find_coordinator"
)

// RouteHooks is implemented by Hooks that count single-port routing
// events (metrics does); other Hooks are not asked.
type RouteHooks interface {
	SinglePortEvent(listener, event string)
}

// event counts a routing event and logs it rate-limited.
func (t *tunnel) event(event, msg string, attrs ...any) {
	if h, counts := t.s.srv.opts.Hooks.(RouteHooks); counts {
		h.SinglePortEvent(t.s.l.opts.Name, event)
	}
	t.s.srv.noisy.Warn("single_port_"+event, t.s.remote, msg, attrs...)
}

// eventInfo is event for what a client causes by its own request (a
// mistake or missing rights, not trouble of the gateway or the cluster):
// counted the same, logged at INFO.
func (t *tunnel) eventInfo(event, msg string, attrs ...any) {
	if h, counts := t.s.srv.opts.Hooks.(RouteHooks); counts {
		h.SinglePortEvent(t.s.l.opts.Name, event)
	}
	t.s.srv.noisy.Info("single_port_"+event, t.s.remote, msg, attrs...)
}

// count counts n of an event that is not logged (routeFindCoordinator).
func (t *tunnel) count(event string, n int) {
	h, counts := t.s.srv.opts.Hooks.(RouteHooks)
	if !counts {
		return
	}
	for range n {
		h.SinglePortEvent(t.s.l.opts.Name, event)
	}
}
