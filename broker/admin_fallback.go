package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The built-in broker's own answers for ACLs (29-31), client quotas
// (48, 49) and SCRAM credentials (50, 51). Their real stores are the
// gateway's (gateway/acls.go, quotas.go, scram.go, behind
// proxy.Answerer), which answer before the backend; these are what a
// client gets when no store takes the key (policy.quotas: off, a
// listener with no users file), as a Kafka broker without an authorizer,
// a quota or a SCRAM credential answers. A key is never closed (a closed
// connection is what admin tools show as "cluster down"):
// * DescribeACLs, CreateACLs, DeleteACLs: SECURITY_DISABLED, "No Authorizer
//   is configured on the broker" (top level) and "No Authorizer is
//   configured." (per creation and filter), as Kafka without an authorizer
//   (AclApis).
// * DescribeClientQuotas: no entries, as Kafka with no quota configured;
//   AlterClientQuotas: INVALID_REQUEST per entity (nothing is stored).
// * DescribeUserSCRAMCredentials: all users (null or empty): none; a named
//   user RESOURCE_NOT_FOUND, as Kafka for a user without credentials;
//   AlterUserSCRAMCredentials: INVALID_REQUEST per user (nothing is stored).

func init() {
	regKey(int16(kmsg.DescribeACLs), 0, 3, syncHandler(placeholderDescribeACLs))
	regKey(int16(kmsg.CreateACLs), 0, 3, syncHandler(placeholderCreateACLs))
	regKey(int16(kmsg.DeleteACLs), 0, 3, syncHandler(placeholderDeleteACLs))
	regKey(int16(kmsg.DescribeClientQuotas), 0, 1, syncHandler(placeholderDescribeClientQuotas))
	regKey(int16(kmsg.AlterClientQuotas), 0, 1, syncHandler(placeholderAlterClientQuotas))
	regKey(int16(kmsg.DescribeUserSCRAMCredentials), 0, 0, syncHandler(placeholderDescribeSCRAM))
	regKey(int16(kmsg.AlterUserSCRAMCredentials), 0, 0, syncHandler(placeholderAlterSCRAM))
}

// Kafka's messages when no authorizer is configured (AclApis).
const (
	noAuthorizer        = "No Authorizer is configured on the broker"
	noAuthorizerChanges = "No Authorizer is configured."
)

func placeholderDescribeACLs(_ *Conn, req *kmsg.DescribeACLsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr(noAuthorizer)
	return resp, nil
}

func placeholderCreateACLs(_ *Conn, req *kmsg.CreateACLsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr(noAuthorizerChanges)
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func placeholderDeleteACLs(_ *Conn, req *kmsg.DeleteACLsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr(noAuthorizerChanges)
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func placeholderDescribeClientQuotas(_ *Conn, req *kmsg.DescribeClientQuotasRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	return resp, nil
}

func placeholderAlterClientQuotas(_ *Conn, req *kmsg.AlterClientQuotasRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, e := range req.Entries {
		r := kmsg.NewAlterClientQuotasResponseEntry()
		r.ErrorCode, r.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("the built-in broker does not store client quotas yet")
		for _, ent := range e.Entity {
			re := kmsg.NewAlterClientQuotasResponseEntryEntity()
			re.Type, re.Name = ent.Type, ent.Name
			r.Entity = append(r.Entity, re)
		}
		resp.Entries = append(resp.Entries, r)
	}
	return resp, nil
}

func placeholderDescribeSCRAM(_ *Conn, req *kmsg.DescribeUserSCRAMCredentialsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	for _, u := range req.Users {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = u.Name, kerr.ResourceNotFound.Code
		r.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist")
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func placeholderAlterSCRAM(_ *Conn, req *kmsg.AlterUserSCRAMCredentialsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	add := func(user string) {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = user, kerr.InvalidRequest.Code
		r.ErrorMessage = kmsg.StringPtr("the built-in broker does not store SCRAM credentials yet")
		resp.Results = append(resp.Results, r)
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return resp, nil
}
