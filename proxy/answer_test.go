package proxy_test

import (
	"context"
	"encoding/binary"
	"io"
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

// TestAnswererPipelined: requests the gateway answers itself, written in
// one burst between requests the upstream answers, come back in request
// order (invariant 1), each with its own correlation id.
func TestAnswererPipelined(t *testing.T) {
	c := startUpstream(t, 1, kfake.SeedTopics(1, "t"))
	srv := startGateway(t, c, func(o *proxy.Options) { o.Answerer = &aclAnswerer{} })
	rc := dialRaw(t, srv.Addr(0).String())
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 4
	acls := kmsg.NewPtrDescribeACLsRequest()
	acls.Version = 1
	acls.ResourceType, acls.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	acls.Operation, acls.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	versions := kmsg.NewPtrApiVersionsRequest()
	versions.Version = 2
	reqs := []kmsg.Request{meta, acls, versions, acls, meta, acls}
	var burst []byte
	for i, r := range reqs {
		burst = append(burst, rc.f.AppendRequest(nil, r, int32(i+1))...) // AppendRequest sizes a frame from dst's start
	}
	rc.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.c.Write(burst); err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		var size [4]byte
		if _, err := io.ReadFull(rc.c, size[:]); err != nil {
			t.Fatalf("response %d: %v", i+1, err)
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(rc.c, frame); err != nil {
			t.Fatalf("response %d: %v", i+1, err)
		}
		if corr := int32(binary.BigEndian.Uint32(frame)); corr != int32(i+1) {
			t.Fatalf("response %d carries correlation id %d", i+1, corr)
		}
		resp := r.ResponseKind()
		resp.SetVersion(r.GetVersion())
		if err := resp.ReadFrom(frame[4:]); err != nil {
			t.Fatalf("response %d (%s): %v", i+1, kmsg.NameForKey(r.Key()), err)
		}
		if a, ok := resp.(*kmsg.DescribeACLsResponse); ok && (len(a.Resources) != 1 || a.Resources[0].ResourceName != "from-gateway") {
			t.Fatalf("response %d: DescribeAcls not the gateway's: %+v", i+1, a)
		}
	}
}
