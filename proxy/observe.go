package proxy

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/wire"
)

// Hooks receive what crosses the gateway, for metrics. Every method must be
// cheap and safe for concurrent use; label values passed are from closed
// sets (listener names from the configuration, close reasons, API keys),
// never client-controlled strings. *metrics.Metrics implements it.
type Hooks interface {
	ConnOpened(listener string)
	ConnClosed(listener, reason string)
	Request(listener string, key int16, outcome string, latency time.Duration, bytesIn, bytesOut int)
	UpstreamDial(node int32, d time.Duration, err error)
	UpstreamConns(delta int, node int32)
	Rewrite(key int16)
	Malformed(cause string)
	Denied(rule string)
	Throttled(rule string, d time.Duration)
	// RequestBudget reports request bytes held in memory across all
	// connections, and whether a read waited for them (body.go).
	RequestBudget(inFlight int64, waited bool)
}

type noHooks struct{}

func (noHooks) ConnOpened(string)                                      {}
func (noHooks) ConnClosed(string, string)                              {}
func (noHooks) Request(string, int16, string, time.Duration, int, int) {}
func (noHooks) UpstreamDial(int32, time.Duration, error)               {}
func (noHooks) UpstreamConns(int, int32)                               {}
func (noHooks) Rewrite(int16)                                          {}
func (noHooks) Malformed(string)                                       {}
func (noHooks) Denied(string)                                          {}
func (noHooks) Throttled(string, time.Duration)                        {}
func (noHooks) RequestBudget(int64, bool)                              {}

// Outcomes of a request, as metrics label them.
const (
	outcomeOK         = "ok"
	outcomeError      = "error"
	outcomeDenied     = "denied"
	outcomeThrottled  = "throttled"
	outcomeNoResponse = "no_response"
)

// observed is what the write loop needs to account for one request.
type observed struct {
	start   time.Time
	bytesIn int
	rec     *audit.Record // nil unless the audit trail wants this request
	req     kmsg.Request  // decoded request, for a full-level record
	denied  bool
	rule    string
	fetched []fetchResult // a streamed Fetch response's partitions (full audit)
	frame   *frameBuf     // a pooled request frame, released by the write loop once the response is written or failed
}

// malformedCause maps a frame error to a metrics label.
func malformedCause(err error) string {
	switch {
	case errors.Is(err, wire.ErrFrameTooLarge):
		return "too_large"
	case errors.Is(err, wire.ErrNotKafka):
		return "not_kafka"
	case errors.Is(err, wire.ErrBadSize):
		return "bad_size"
	case errors.Is(err, wire.ErrTruncated):
		return "bad_header"
	}
	return "truncated"
}

// auditRecord starts a request record if the trail wants one.
func (s *session) auditRecord(h wire.RequestHeader, now time.Time, size int) *audit.Record {
	t := s.srv.opts.Audit
	if !t.Wants(s.l.opts.Name, h.Key, string(h.ClientID)) {
		return nil
	}
	rec := &audit.Record{
		Time: now, Event: audit.EventRequest, ConnID: s.id, Listener: s.l.opts.Name, ClientAddr: s.remote,
		ClientID: string(h.ClientID), SoftwareName: s.softwareName, SoftwareVersion: s.softwareVersion,
		TLSSubject: s.tlsSubject, Principal: s.subj.Principal,
		API: audit.APIName(h.Key), Key: h.Key, Version: h.Version, Correlation: h.Correlation,
		BytesIn: 4 + size, Backend: s.backendName(), VirtualCluster: s.vcLabel,
	}
	return rec
}

func (s *session) backendName() string {
	if s.local != nil {
		return "built-in"
	}
	return s.upAddr
}

// connRecord logs a connect or disconnect record.
func (s *session) connRecord(event, reason string) {
	t := s.srv.opts.Audit
	if t.Level() == audit.Off {
		return
	}
	t.Log(&audit.Record{Time: time.Now(), Event: event, ConnID: s.id, Listener: s.l.opts.Name,
		ClientAddr: s.remote, Backend: s.backendName(), CloseReason: reason})
}

// finish accounts one request once its response is written (resp is the
// response body when it was decoded or in memory, for a full record).
func (s *session) finish(p *pending, bytesOut int, respBody []byte) {
	o := &p.obs // o.req aliases o.frame, which the write loop releases after this
	latency := time.Since(o.start)
	outcome := outcomeOK
	switch {
	case o.denied:
		outcome = outcomeDenied
	case p.throttle > 0:
		outcome = outcomeThrottled
	case respBody != nil && topLevelError(p.key, p.version, respBody):
		outcome = outcomeError
	}
	s.hooks.Request(s.l.opts.Name, p.key, outcome, latency, o.bytesIn, bytesOut)
	if o.rec == nil {
		return
	}
	rec := o.rec
	rec.LatencyMs = float64(latency.Microseconds()) / 1000
	rec.BytesOut = bytesOut
	rec.Rule = o.rule
	rec.ThrottleMs = p.throttle.Milliseconds()
	switch {
	case o.denied:
		rec.Decision = audit.Denied
	case p.throttle > 0:
		rec.Decision = audit.Throttled
	default:
		rec.Decision = audit.Forwarded
	}
	if o.req != nil && s.srv.opts.Audit.Level() == audit.Full {
		var resp kmsg.Response
		if respBody != nil {
			resp = o.req.ResponseKind()
			if resp.ReadFrom(respBody) != nil {
				resp = nil
			}
		}
		audit.Describe(rec, o.req, resp, &s.srv.names)
		for _, f := range o.fetched {
			name := f.topic.name
			if f.topic.id != ([16]byte{}) {
				if n, ok := s.srv.names.TopicName(f.topic.id); ok {
					name = n
				}
			}
			audit.AddFetchResult(rec, name, f.partition, f.bytes, f.errorCode)
			audit.AddFetchRecords(rec, name, f.partition, f.records)
		}
	}
	if err := s.srv.opts.Audit.Log(rec); err != nil {
		s.log.Error("audit sink failing; refusing further requests (strict mode)", "err", err)
	}
}

// topLevelError reports a non-zero top-level error code, for the keys whose
// response body starts with one (apis.HasTopLevelError: after
// ThrottleMillis from some version on). Per-partition errors are not
// "errors" of the request here; the audit record lists them.
func topLevelError(key, version int16, body []byte) bool {
	off, ok := apis.HasTopLevelError(key, version)
	return ok && len(body) >= off+2 && (body[off] != 0 || body[off+1] != 0)
}

// acksZeroDone accounts a Produce with acks=0: nothing comes back.
func (s *session) acksZeroDone(h wire.RequestHeader, o observed) {
	s.hooks.Request(s.l.opts.Name, h.Key, outcomeNoResponse, 0, o.bytesIn, 0)
	if o.rec != nil {
		acks := int16(0)
		o.rec.Acks, o.rec.Decision = &acks, audit.Forwarded
		if o.req != nil && s.srv.opts.Audit.Level() == audit.Full {
			audit.Describe(o.rec, o.req, nil, &s.srv.names)
		}
		s.srv.opts.Audit.Log(o.rec)
	}
}

// noteFetched keeps what a streamed built-in Fetch body returned per
// partition, for the audit record (the body is written, and released,
// before the request is accounted).
func (s *session) noteFetched(p *pending, body wire.Body) {
	fs, ok := body.(wire.FetchSummary)
	if !ok || p.obs.rec == nil {
		return
	}
	for _, f := range fs.Fetched() {
		p.obs.fetched = append(p.obs.fetched, fetchResult{topic: fetchTopicRef{name: f.Topic, id: f.TopicID},
			partition: f.Partition, errorCode: f.ErrorCode, bytes: f.Bytes, records: f.Records})
	}
}
