package acl

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Keys answers DescribeAcls, CreateAcls and DeleteAcls from the store, as
// a broker with an authorizer does (KafkaApis handleDescribeAcls,
// handleCreateAcls, handleDeleteAcls). Who may call them is decided
// before, by the policy engine with the Authorizer (DESCRIBE on the
// cluster to describe, ALTER to create and delete).
//
// A version before 1 has no pattern type: its filters and ACLs are
// LITERAL, which kmsg's defaults already are.

// Answer answers one ACL request from the store; other keys are an error.
func (s *Store) Answer(req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.DescribeACLsRequest:
		return s.describe(r), nil
	case *kmsg.CreateACLsRequest:
		return s.create(r), nil
	case *kmsg.DeleteACLsRequest:
		return s.delete(r), nil
	}
	return nil, fmt.Errorf("acl: not an ACL request: %T", req)
}

func (s *Store) describe(r *kmsg.DescribeACLsRequest) *kmsg.DescribeACLsResponse {
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := Filter{ResourceType: r.ResourceType, ResourceName: r.ResourceName, PatternType: r.ResourcePatternType,
		Principal: r.Principal, Host: r.Host, Operation: r.Operation, Permission: r.PermissionType}
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
		return resp
	}
	type resKey struct {
		typ  ResourceType
		name string
		pat  PatternType
	}
	at := map[resKey]int{}
	for _, b := range s.Describe(f) {
		k := resKey{b.ResourceType, b.ResourceName, b.PatternType}
		i, ok := at[k]
		if !ok {
			rr := kmsg.NewDescribeACLsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ResourcePatternType = k.typ, k.name, k.pat
			resp.Resources = append(resp.Resources, rr)
			i = len(resp.Resources) - 1
			at[k] = i
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
	}
	return resp
}

func (s *Store) create(r *kmsg.CreateACLsRequest) *kmsg.CreateACLsResponse {
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(r.Creations))
	var valid []Binding
	var at []int
	for i, c := range r.Creations {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		b := Binding{ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: c.ResourcePatternType,
			Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType}
		if err := b.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			continue
		}
		valid = append(valid, b)
		at = append(at, i)
	}
	if len(valid) == 0 {
		return resp
	}
	if err := s.Create(valid); err != nil {
		code, msg := kerr.PolicyViolation.Code, err.Error()
		if !errors.Is(err, errFull) {
			code, msg = kerr.UnknownServerError.Code, s.writeFailed(err)
		}
		for _, i := range at {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, kmsg.StringPtr(msg)
		}
	}
	return resp
}

func (s *Store) delete(r *kmsg.DeleteACLsRequest) *kmsg.DeleteACLsResponse {
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(r.Filters))
	var valid []Filter
	var at []int
	for i, rf := range r.Filters {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		f := Filter{ResourceType: rf.ResourceType, ResourceName: rf.ResourceName, PatternType: rf.ResourcePatternType,
			Principal: rf.Principal, Host: rf.Host, Operation: rf.Operation, Permission: rf.PermissionType}
		if err := f.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			continue
		}
		valid = append(valid, f)
		at = append(at, i)
	}
	if len(valid) == 0 {
		return resp
	}
	removed, err := s.Delete(valid)
	var msg string
	if err != nil {
		msg = s.writeFailed(err)
	}
	for j, i := range at {
		if err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(msg)
			continue
		}
		for _, b := range removed[j] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
		}
	}
	return resp
}

// disabledMessage is Kafka's, for a broker without an authorizer.
const disabledMessage = "No Authorizer is configured on the broker"

// Disabled answers an ACL request as a broker without an authorizer does:
// SECURITY_DISABLED (KafkaApis, when authorizer is empty).
func Disabled(req kmsg.Request) (kmsg.Response, error) {
	code, msg := kerr.SecurityDisabled.Code, kmsg.StringPtr(disabledMessage)
	switch r := req.(type) {
	case *kmsg.DescribeACLsRequest:
		resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp, nil
	case *kmsg.CreateACLsRequest:
		resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
		for range r.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code, msg
			resp.Results = append(resp.Results, res)
		}
		return resp, nil
	case *kmsg.DeleteACLsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
		for range r.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code, msg
			resp.Results = append(resp.Results, res)
		}
		return resp, nil
	}
	return nil, fmt.Errorf("acl: not an ACL request: %T", req)
}

// writeFailed reports a failed write to OnWriteError and returns what
// the client is told: not the error, which names the gateway's file.
func (s *Store) writeFailed(err error) string {
	if s.OnWriteError != nil {
		s.OnWriteError(err)
	}
	return "the gateway could not store its ACLs (see its log)"
}
