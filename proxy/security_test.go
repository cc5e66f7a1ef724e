package proxy_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// plainServer is a PLAIN authenticator for session tests: the session's
// SASL state machine is what is under test here (package auth has the real
// mechanisms and their own tests with real clients).
type plainServer struct{ users map[string]string }

func (p plainServer) Mechanisms() []string { return []string{"PLAIN"} }

func (p plainServer) Start(m string) (proxy.SASLExchange, error) {
	if m != "PLAIN" {
		return nil, fmt.Errorf("mechanism %q not offered", m)
	}
	return &plainExchange{users: p.users}, nil
}

type plainExchange struct {
	users     map[string]string
	principal string
}

func (x *plainExchange) Step(tok []byte) ([]byte, bool, error) {
	parts := bytes.Split(tok, []byte{0})
	if len(parts) != 3 || x.users[string(parts[1])] != string(parts[2]) || string(parts[2]) == "" {
		return nil, false, errors.New("Authentication failed: invalid credentials")
	}
	x.principal = string(parts[1])
	return nil, true, nil
}
func (x *plainExchange) Principal() string              { return x.principal }
func (x *plainExchange) SessionLifetime() time.Duration { return 0 }

func withSASL(s proxy.SASLServer) func(*proxy.Options) {
	return func(o *proxy.Options) { o.Listeners[0].SASL = s }
}

// TestSASLTermination: the gateway authenticates clients itself, for both
// backends: kgo with the right password works and its principal reaches
// policy; a wrong password gets SASL_AUTHENTICATION_FAILED; an unoffered
// mechanism gets UNSUPPORTED_SASL_MECHANISM; a request before
// authentication and an oversized pre-auth frame close the connection;
// sarama's SaslHandshake v0 raw-token flow works.
func TestSASLTermination(t *testing.T) {
	users := plainServer{users: map[string]string{"alice": "s3cret", "bob": "hunter2"}}
	c := startUpstream(t, 1, kfake.SeedTopics(1, "auth"))
	srv := startGateway(t, c, withSASL(users))
	setPolicy(t, srv, "policy:\n  rules:\n    - name: bob-reads-only\n      match: { principal: bob, api: [Produce] }\n      action: deny\n")
	ctx := ctxT(t, 30*time.Second)

	alice := newClient(t, srv, nil, kgo.SASL(plain.Auth{User: "alice", Pass: "s3cret"}.AsMechanism()), kgo.DefaultProduceTopic("auth"))
	if err := alice.ProduceSync(ctx, kgo.StringRecord("from alice")).FirstErr(); err != nil {
		t.Fatalf("authenticated produce: %v", err)
	}
	bob := newClient(t, srv, nil, kgo.SASL(plain.Auth{User: "bob", Pass: "hunter2"}.AsMechanism()), kgo.DefaultProduceTopic("auth"))
	if err := bob.ProduceSync(ctx, kgo.StringRecord("from bob")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("policy on the SASL principal: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	wrong := newClient(t, srv, nil, kgo.SASL(plain.Auth{User: "alice", Pass: "nope"}.AsMechanism()), kgo.DefaultProduceTopic("auth"),
		kgo.RecordDeliveryTimeout(3*time.Second))
	if err := wrong.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	scr := newClient(t, srv, nil, kgo.SASL(scram.Auth{User: "alice", Pass: "s3cret"}.AsSha256Mechanism()), kgo.DefaultProduceTopic("auth"),
		kgo.RecordDeliveryTimeout(3*time.Second))
	if err := scr.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); !errors.Is(err, kerr.UnsupportedSaslMechanism) {
		t.Fatalf("unoffered mechanism: %v, want UNSUPPORTED_SASL_MECHANISM", err)
	}

	// Metadata before authenticating: Kafka closes the connection.
	rc := dialRaw(t, srv.Addr(0).String())
	if _, _, ok := rc.roundTrip(kmsg.NewPtrMetadataRequest()); ok {
		t.Fatal("a request before authentication was answered")
	}
	// A pre-authentication frame over 512 KiB is refused before it is read.
	conn, err := net.Dial("tcp", srv.Addr(0).String())
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte{0, 0x10, 0, 0}) // 1 MiB
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _ := io.Copy(io.Discard, conn); n != 0 {
		t.Fatal("oversized pre-auth frame answered")
	}
	conn.Close()

	// sarama with SaslHandshake v0: raw tokens after the handshake.
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_0_0_0
	cfg.ApiVersionsRequest = false // sarama requires it with SASL v0
	cfg.Net.SASL.Enable, cfg.Net.SASL.Handshake = true, true
	cfg.Net.SASL.Version = sarama.SASLHandshakeV0
	cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", "s3cret"
	cfg.Producer.Return.Successes = true
	prod, err := sarama.NewSyncProducer([]string{srv.Addr(0).String()}, cfg)
	if err != nil {
		t.Fatalf("sarama with SASL v0: %v", err)
	}
	defer prod.Close()
	if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "auth", Value: sarama.StringEncoder("v0")}); err != nil {
		t.Fatalf("sarama produce after SASL v0: %v", err)
	}
}

// TestMutualTLS: a TLS listener requiring client certificates; the
// certificate's CN is the principal policy sees; a client without a
// certificate and a plaintext client are refused with a clear reason.
func TestMutualTLS(t *testing.T) {
	ca := newTestCA(t)
	serverCert := ca.issue(t, "gateway.test", net.ParseIP("127.0.0.1"))
	lb := &logBuffer{}
	tlsSrv := startBuiltinWith(t, withLog(lb), func(o *proxy.Options) {
		o.Listeners[0].TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: ca.pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
		o.Listeners[0].Principal = func(c *x509.Certificate) (string, error) { return c.Subject.CommonName, nil }
	})
	setPolicy(t, tlsSrv, `
policy:
  rules:
    - name: writer-may-produce
      match: { principal: writer, api: [Produce] }
      action: allow
    - name: nobody-else
      match: { api: [Produce] }
      action: deny
`)
	ctx := ctxT(t, 30*time.Second)
	clientTLS := func(cn string) *tls.Config {
		cfg := &tls.Config{RootCAs: ca.pool, ServerName: "gateway.test", MinVersion: tls.VersionTLS12}
		if cn != "" {
			cfg.Certificates = []tls.Certificate{ca.issue(t, cn)}
		}
		return cfg
	}
	writer := newClient(t, tlsSrv, nil, kgo.DialTLSConfig(clientTLS("writer")), kgo.DefaultProduceTopic("mtls"), kgo.AllowAutoTopicCreation())
	if err := writer.ProduceSync(ctx, kgo.StringRecord("ok")).FirstErr(); err != nil {
		t.Fatalf("mTLS produce as writer: %v", err)
	}
	reader := newClient(t, tlsSrv, nil, kgo.DialTLSConfig(clientTLS("reader")), kgo.DefaultProduceTopic("mtls"))
	if err := reader.ProduceSync(ctx, kgo.StringRecord("no")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce as reader: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	anon := newClient(t, tlsSrv, nil, kgo.DialTLSConfig(clientTLS("")), kgo.DefaultProduceTopic("mtls"), kgo.RecordDeliveryTimeout(2*time.Second))
	if err := anon.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	// Plaintext Kafka on the TLS port.
	rc := dialRaw(t, tlsSrv.Addr(0).String())
	if _, _, ok := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()); ok {
		t.Fatal("plaintext request answered on a TLS listener")
	}
	waitFor(t, ctx, "the plaintext client named in the log", func() bool { return strings.Contains(lb.String(), "not speaking TLS") })
}
