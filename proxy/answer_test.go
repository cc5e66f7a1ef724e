package proxy_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// aclAnswerer answers DescribeAcls with one ACL naming who asked, so a
// test can tell the gateway's answer from the upstream's (which has no
// ACLs) and see the identity the stage passed.
type aclAnswerer struct {
	mu    sync.Mutex
	asked []proxy.Asker
}

func (a *aclAnswerer) Answers(_ string, key int16) bool { return key == apis.DescribeACLs }

func (a *aclAnswerer) Answer(_ context.Context, who proxy.Asker, req kmsg.Request) (kmsg.Response, error) {
	a.mu.Lock()
	a.asked = append(a.asked, who)
	a.mu.Unlock()
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	res := kmsg.NewDescribeACLsResponseResource()
	res.ResourceType, res.ResourceName, res.ResourcePatternType = kmsg.ACLResourceTypeTopic, "from-gateway", kmsg.ACLResourcePatternTypeLiteral
	acl := kmsg.NewDescribeACLsResponseResourceACL()
	acl.Principal, acl.Host = "User:asked-by-"+who.ClientID, "*"
	acl.Operation, acl.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	res.ACLs = append(res.ACLs, acl)
	resp.Resources = append(resp.Resources, res)
	return resp, nil
}

// TestAnswererAnswersInOrder: a key the Answerer takes is answered by
// the gateway on a port-per-broker and a single-port listener, between
// requests the upstream answers (each in its slot), and never reaches
// the upstream.
func TestAnswererAnswersInOrder(t *testing.T) {
	for _, mode := range []string{"port-per-broker", "single-port"} {
		t.Run(mode, func(t *testing.T) {
			c := startUpstream(t, 3, kfake.SeedTopics(3, "t"))
			var upstreamACLs sync.Map
			c.ControlKey(int16(kmsg.DescribeACLs), func(kmsg.Request) (kmsg.Response, error, bool) {
				upstreamACLs.Store("seen", true)
				return nil, nil, false
			})
			a := &aclAnswerer{}
			srv := startGateway(t, c, func(o *proxy.Options) {
				o.Answerer = a
				if mode == "single-port" {
					o.Listeners[0].SinglePort = &proxy.SinglePortOptions{VirtualNode: 7}
				}
			})
			cl := newClient(t, srv, nil, kgo.ClientID("acl-test"), kgo.DefaultProduceTopic("t"))
			ctx := ctxT(t, 30*time.Second)
			for i := range 5 {
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
					t.Fatalf("produce %d: %v", i, err)
				}
				req := kmsg.NewPtrDescribeACLsRequest()
				req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
				req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				res, err := req.RequestWith(ctx, cl)
				if err != nil {
					t.Fatalf("describe acls: %v", err)
				}
				found := false
				for _, r := range res.Resources {
					for _, d := range r.ACLs {
						if r.ResourceName == "from-gateway" && d.Principal == "User:asked-by-acl-test" {
							found = true
						}
					}
				}
				if !found {
					t.Fatalf("round %d: DescribeAcls answer is not the gateway's: %+v", i, res)
				}
			}
			if _, ok := upstreamACLs.Load("seen"); ok {
				t.Error("a DescribeAcls request reached the upstream")
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			if len(a.asked) != 5 || a.asked[0].Listener != "test" || !a.asked[0].Addr.IsLoopback() {
				t.Errorf("asked %+v, want 5 asks from listener test on loopback", a.asked)
			}
		})
	}
}
