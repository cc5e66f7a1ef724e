package gateway

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/auth"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/lograte"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// SCRAM credentials through the Kafka API (KIP-554:
// DescribeUserScramCredentials, AlterUserScramCredentials), backed by the
// users file the gateway's SASL listeners authenticate against
// (listeners[].sasl.users_file). Which file a request changes: its
// listener's own users file; on a listener without one, the only users
// file of the configuration if there is exactly one. Otherwise the keys
// are not the gateway's and go to the backend: the upstream's own SCRAM
// store, or the built-in broker's answer (it has no SCRAM store).
//
// Alter writes the file atomically (auth.Users.Save) and tells the SASL
// servers that read it, so the next SCRAM login sees the change.
// Anyone who may send the request may change any credential, as on a
// Kafka cluster without an authorizer: restrict the two keys with a
// policy rule (or ACLs) on listeners open to untrusted clients.

// scramMechanisms maps KIP-554's mechanism numbers to SASL names.
var scramMechanisms = map[int8]string{1: configs.MechScramSHA256, 2: configs.MechScramSHA512}

func scramMechanismNumber(name string) int8 {
	for n, m := range scramMechanisms {
		if m == name {
			return n
		}
	}
	return 0
}

// usersFile is one users file and the SASL servers that read it.
type usersFile struct {
	path    string
	servers []*auth.Server
	log     *lograte.Logger
	mu      sync.Mutex // serializes alters of the file
}

type scramAnswerer struct {
	files    map[string]*usersFile // by listener
	log      *lograte.Logger
	refused  *answerRefusals
	mayAlter func(who proxy.Asker, credentials bool) bool // answer_guard.go
}

// newSCRAMAnswerer returns the answerer for the plan's listeners, or nil
// when no listener has a users file.
func newSCRAMAnswerer(listeners []proxy.ListenerOptions, log *lograte.Logger, refused *answerRefusals, mayAlter func(proxy.Asker, bool) bool) proxy.Answerer {
	byPath := map[string]*usersFile{}
	a := &scramAnswerer{files: map[string]*usersFile{}, log: log, refused: refused, mayAlter: mayAlter}
	for _, l := range listeners {
		ss, ok := l.SASL.(saslServer)
		if !ok || ss.s.UsersFile() == "" {
			continue
		}
		p := ss.s.UsersFile()
		f := byPath[p]
		if f == nil {
			f = &usersFile{path: p, log: log}
			byPath[p] = f
		}
		f.servers = append(f.servers, ss.s)
		a.files[l.Name] = f
	}
	if len(byPath) == 0 {
		return nil
	}
	if len(byPath) == 1 {
		// The one users file serves the other SASL listeners too (a
		// JWKS or PLAIN-only listener beside a SCRAM one); a listener
		// without SASL never answers these keys: its clients are not
		// authenticated.
		for _, f := range byPath {
			for _, l := range listeners {
				if l.SASL != nil {
					a.files[l.Name] = f
				}
			}
		}
	}
	return a
}

func (a *scramAnswerer) Answers(listener string, key int16) bool {
	return (key == apis.DescribeUserSCRAMCredentials || key == apis.AlterUserSCRAMCredentials) && a.files[listener] != nil
}

func (a *scramAnswerer) Answer(_ context.Context, who proxy.Asker, req kmsg.Request) (kmsg.Response, error) {
	f := a.files[who.Listener]
	switch r := req.(type) {
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		resp := f.describe(r)
		a.refused.add(apis.DescribeUserSCRAMCredentials, resp.ErrorCode)
		for _, res := range resp.Results {
			a.refused.add(apis.DescribeUserSCRAMCredentials, res.ErrorCode)
		}
		return resp, nil
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		resp := refuseSCRAMAlter(r)
		if a.mayAlter == nil || a.mayAlter(who, true) {
			resp = f.alter(r)
		}
		var changed, failed int
		for _, res := range resp.Results {
			a.refused.add(apis.AlterUserSCRAMCredentials, res.ErrorCode)
			if res.ErrorCode == 0 {
				changed++
			} else {
				failed++
			}
		}
		a.log.Info("scram_alter", who.Addr.String(), "SCRAM credentials altered through the Kafka API", "listener", who.Listener,
			"principal", who.Principal, "users_file", f.path, "users_changed", changed, "users_refused", failed)
		return resp, nil
	}
	return nil, fmt.Errorf("scram answerer: unexpected %T", req)
}

// load reads the users file; a missing file is no users.
func (f *usersFile) load() (*auth.Users, error) {
	u, err := auth.LoadUsers(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return auth.NewUsers(), nil
	}
	return u, err
}

func (f *usersFile) describe(req *kmsg.DescribeUserSCRAMCredentialsRequest) *kmsg.DescribeUserSCRAMCredentialsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	users, err := f.load()
	if err != nil {
		f.log.Warn("users_file", "", "SCRAM describe: cannot read the users file", "file", f.path, "err", err)
		resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(usersFileUnreadable)
		return resp
	}
	result := func(name string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = name
		for _, mech := range users.Mechanisms(name) {
			c, _ := users.Credential(name, mech)
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism, ci.Iterations = scramMechanismNumber(mech), int32(c.Iterations)
			r.CredentialInfos = append(r.CredentialInfos, ci)
		}
		return r
	}
	if len(req.Users) == 0 { // null or empty: every user (Kafka's KafkaApis)
		for _, name := range users.Names() {
			resp.Results = append(resp.Results, result(name))
		}
		return resp
	}
	count := map[string]int{}
	for _, u := range req.Users {
		count[u.Name]++
	}
	done := map[string]bool{}
	for _, u := range req.Users {
		if done[u.Name] {
			continue
		}
		done[u.Name] = true
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = u.Name
		switch {
		case count[u.Name] > 1:
			r.ErrorCode, r.ErrorMessage = kerr.DuplicateResource.Code, kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: "+u.Name)
		case !users.Has(u.Name):
			r.ErrorCode, r.ErrorMessage = kerr.ResourceNotFound.Code, kmsg.StringPtr("Attempt to describe a user credential that does not exist: "+u.Name)
		default:
			r = result(u.Name)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// usersFileUnreadable is what a client learns when the users file cannot
// be read (the path and cause go to the gateway's log only).
const usersFileUnreadable = "the gateway could not read its users file (see its log)"

// scramOp is one deletion or upsertion of a user's credential.
type scramOp struct {
	mech       int8
	delete     bool
	salt       []byte
	salted     []byte
	iterations int32
}

func (f *usersFile) alter(req *kmsg.AlterUserSCRAMCredentialsRequest) *kmsg.AlterUserSCRAMCredentialsResponse {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var order []string
	ops := map[string][]scramOp{}
	add := func(name string, op scramOp) {
		if _, ok := ops[name]; !ok {
			order = append(order, name)
		}
		ops[name] = append(ops[name], op)
	}
	for _, d := range req.Deletions {
		add(d.Name, scramOp{mech: d.Mechanism, delete: true})
	}
	for _, u := range req.Upsertions {
		add(u.Name, scramOp{mech: u.Mechanism, salt: u.Salt, salted: u.SaltedPassword, iterations: u.Iterations})
	}
	results := make([]kmsg.AlterUserSCRAMCredentialsResponseResult, len(order))
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, err := f.load()
	if err != nil {
		f.log.Warn("users_file", "", "SCRAM alter: cannot read the users file", "file", f.path, "err", err)
		for i, name := range order {
			results[i] = scramResult(name, kerr.UnknownServerError, usersFileUnreadable)
		}
		resp.Results = results
		return resp
	}
	next := cur.Clone()
	var applied []int
	for i, name := range order {
		code, msg := applyScramOps(cur, next, name, ops[name])
		results[i] = scramResult(name, code, msg)
		if code == nil {
			applied = append(applied, i)
		}
	}
	if len(applied) > 0 {
		if err := next.Save(f.path); err != nil {
			f.log.Warn("users_file", "", "SCRAM alter: cannot write the users file", "file", f.path, "err", err)
			for _, i := range applied {
				results[i] = scramResult(order[i], kerr.UnknownServerError, "the gateway could not write its users file (see its log)")
			}
		} else {
			for _, s := range f.servers {
				s.UsersChanged()
			}
		}
	}
	resp.Results = results
	return resp
}

func scramResult(name string, code *kerr.Error, msg string) kmsg.AlterUserSCRAMCredentialsResponseResult {
	r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
	r.User = name
	if code != nil {
		r.ErrorCode, r.ErrorMessage = code.Code, &msg
	}
	return r
}

// applyScramOps validates one user's operations as Kafka does and, if
// all are valid, applies them to next (cur is the file as it was).
func applyScramOps(cur, next *auth.Users, name string, ops []scramOp) (*kerr.Error, string) {
	if name == "" {
		return kerr.UnacceptableCredential, "Username must not be empty"
	}
	if err := auth.CheckUserName(name); err != nil {
		return kerr.UnacceptableCredential, err.Error()
	}
	seen := map[int8]bool{}
	for _, op := range ops {
		if seen[op.mech] {
			return kerr.DuplicateResource, "A user credential cannot be altered twice in the same request"
		}
		seen[op.mech] = true
	}
	creds := map[string]auth.Credential{}
	for _, op := range ops {
		mech, ok := scramMechanisms[op.mech]
		if !ok {
			return kerr.UnsupportedSaslMechanism, fmt.Sprintf("Unknown SCRAM mechanism %d", op.mech)
		}
		if op.delete {
			if _, ok := cur.Credential(name, mech); !ok {
				return kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist"
			}
			continue
		}
		switch {
		case op.iterations < auth.MinIterations:
			return kerr.UnacceptableCredential, fmt.Sprintf("Too few iterations: %d (at least %d)", op.iterations, auth.MinIterations)
		case op.iterations > auth.MaxIterations:
			return kerr.UnacceptableCredential, fmt.Sprintf("Too many iterations: %d (at most %d)", op.iterations, auth.MaxIterations)
		}
		c, err := auth.CredentialFromSalted(mech, op.salt, op.salted, int(op.iterations))
		if err != nil {
			return kerr.UnacceptableCredential, err.Error()
		}
		creds[mech] = c
	}
	for _, op := range ops {
		mech := scramMechanisms[op.mech]
		if op.delete {
			next.RemoveCredential(name, mech)
		} else if err := next.SetCredential(name, mech, creds[mech]); err != nil {
			return kerr.UnacceptableCredential, err.Error()
		}
	}
	return nil, ""
}

// Versions offers the SCRAM keys in ApiVersions on the listeners whose
// users file the gateway answers from (proxy.VersionsAnswerer).
func (a *scramAnswerer) Versions(listener string) map[int16][2]int16 {
	if a.files[listener] == nil {
		return nil
	}
	return answeredVersions(apis.DescribeUserSCRAMCredentials, apis.AlterUserSCRAMCredentials)
}
