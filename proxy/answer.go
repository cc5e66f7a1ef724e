package proxy

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/wire"
)

// Answerer answers some API keys in the gateway itself, in front of
// either backend: the gateway's own stores of ACLs, client quotas and
// SCRAM credentials (README, "Security at the boundary"), which must
// govern what crosses the gateway even when the upstream has no
// authorizer (DESIGN.md, principle 8).
//
// The answer stage (stageAnswer) asks Answers for every request that
// policy let through; for a key it answers, the request is decoded and
// Answer is called in the session's read loop, in request order, so
// the answer keeps its slot like any other response (invariant 1). An
// Answerer therefore should not block for long (an fsync of a small
// state file is fine: these are rare administrative requests).
//
// Ownership: the request passed to Answer is decoded into its own
// memory except for byte fields, which may alias the frame; Answer
// must copy what it keeps beyond the call. The response it returns is
// the gateway's to encode.
type Answerer interface {
	// Answers reports whether the gateway answers this key on this
	// listener instead of its backend.
	Answers(listener string, key int16) bool
	// Answer returns the response to req (the version is set by the
	// caller). An error closes the connection, as a backend error does.
	Answer(ctx context.Context, who Asker, req kmsg.Request) (kmsg.Response, error)
}

// Asker is who sent a request the gateway answers itself: the session's
// identity as policy sees it.
type Asker struct {
	Listener  string
	Principal string // the name policy matches (SASL user or mapped certificate); "" when anonymous
	ClientID  string
	Addr      netip.Addr
}

// stageAnswer answers, in the gateway, a key the Answerer takes (see
// Answerer). It runs after policy (a rule denying the key wins) and the
// entry stage (the entry carries the audit record and the policy merge),
// before routing and the backend.
func (s *session) stageAnswer(r *request) (bool, error) {
	a := s.srv.opts.Answerer
	if a == nil || !r.h.Known || !a.Answers(s.l.opts.Name, r.h.Key) {
		return false, nil
	}
	req, err := s.routedRequest(r) // route.go: policy's re-encoded request, or the client's
	if err != nil {
		return true, err
	}
	who := Asker{Listener: s.subj.Listener, Principal: s.subj.Principal, ClientID: string(r.h.ClientID), Addr: s.subj.Addr}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the session closing cancels the answer
		select {
		case <-s.closed:
			cancel()
		case <-stop:
		}
	}()
	resp, aerr := a.Answer(ctx, who, req)
	if !r.expectResponse {
		return true, aerr
	}
	ch := make(chan result, 1)
	r.p.local = ch
	if err := s.push(r.p); err != nil {
		return true, err
	}
	if aerr != nil {
		ch <- result{err: aerr}
		return true, nil
	}
	resp.SetVersion(req.GetVersion())
	ch <- result{body: wire.Bytes(resp.AppendTo(nil))}
	return true, nil
}

// Answerers is several Answerers as one: the first that answers a key
// on a listener answers it. The gateway installs its stores' answerers
// this way (ACLs, client quotas, SCRAM credentials), each taking its own
// keys.
type Answerers []Answerer

// Answers reports whether any of as answers key on listener.
func (as Answerers) Answers(listener string, key int16) bool {
	return as.pick(listener, key) != nil
}

// Answer asks the first of as that answers the request's key on the
// asker's listener.
func (as Answerers) Answer(ctx context.Context, who Asker, req kmsg.Request) (kmsg.Response, error) {
	a := as.pick(who.Listener, req.Key())
	if a == nil {
		return nil, fmt.Errorf("no answerer takes %s", apiName(req.Key()))
	}
	return a.Answer(ctx, who, req)
}

func (as Answerers) pick(listener string, key int16) Answerer {
	for _, a := range as {
		if a != nil && a.Answers(listener, key) {
			return a
		}
	}
	return nil
}
