package auth

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func secretFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func dialAuth(t *testing.T, addr string, cfg *configs.UpstreamSASL) (time.Duration, error) {
	t.Helper()
	m, err := ClientMechanism(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	life, err := Authenticate(ctx, conn, m, "127.0.0.1")
	if err == nil {
		// The connection is usable for ordinary requests afterwards.
		rt := &roundTripper{conn: conn, f: kmsg.NewRequestFormatter(), corr: 100}
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 4
		if err := rt.do(req, kmsg.NewPtrMetadataResponse()); err != nil {
			t.Errorf("metadata after authentication: %v", err)
		}
	}
	return life, err
}

// Against kfake, a Kafka implementation with SASL (PLAIN and SCRAM) and
// KIP-368 session lifetimes.
func TestAuthenticateAgainstKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "gw", "gw-plain"),
		kfake.Superuser("SCRAM-SHA-256", "gw", "gw-256"),
		kfake.Superuser("SCRAM-SHA-512", "gw", "gw-512"),
		kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "60000"}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	for mech, pass := range map[string]string{"PLAIN": "gw-plain", "SCRAM-SHA-256": "gw-256", "SCRAM-SHA-512": "gw-512"} {
		t.Run(mech, func(t *testing.T) {
			// The trailing newline an editor leaves is not part of the password.
			life, err := dialAuth(t, addr, &configs.UpstreamSASL{Mechanism: mech, Username: "gw", PasswordFile: secretFile(t, pass+"\n")})
			if err != nil || life != time.Minute {
				t.Fatalf("lifetime %v, %v; want 1m", life, err)
			}
			// kfake closes the connection on bad credentials where Kafka
			// first answers SASL_AUTHENTICATION_FAILED (that answer is
			// checked against our own Server below): taken as the same
			// refusal, naming the mechanism.
			_, err = dialAuth(t, addr, &configs.UpstreamSASL{Mechanism: mech, Username: "gw", PasswordFile: secretFile(t, "wrong")})
			if !errors.Is(err, ErrUpstreamAuth) || !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), mech) {
				t.Errorf("wrong password: %v, want a SASL_AUTHENTICATION_FAILED refusal naming %s", err, mech)
			}
		})
	}
	_, err = dialAuth(t, addr, &configs.UpstreamSASL{Mechanism: "OAUTHBEARER", TokenFile: secretFile(t, "x.y.z")})
	if !errors.Is(err, ErrUpstreamAuth) || !errors.Is(err, kerr.UnsupportedSaslMechanism) {
		t.Errorf("mechanism the broker lacks: %v", err)
	}
}

func TestClientMechanism(t *testing.T) {
	if _, err := ClientMechanism(&configs.UpstreamSASL{Passthrough: true}); !errors.Is(err, ErrPassthrough) {
		t.Errorf("passthrough: %v", err)
	}
	if _, err := ClientMechanism(&configs.UpstreamSASL{Mechanism: "GSSAPI"}); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Errorf("GSSAPI: %v", err)
	}
	// Secrets are read at dial time: a missing or empty file fails then.
	for _, path := range []string{filepath.Join(t.TempDir(), "none"), secretFile(t, "\n")} {
		m, err := ClientMechanism(&configs.UpstreamSASL{Mechanism: "PLAIN", Username: "u", PasswordFile: path})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := m.Authenticate(context.Background(), "h"); err == nil {
			t.Errorf("%s: authenticated", path)
		}
	}
}

// serveSASL is a minimal broker front for the tests: it answers
// SaslHandshake and SaslAuthenticate from a Server, as the gateway's
// session will, then Metadata with an empty response.
func serveSASL(conn net.Conn, s *Server, lifetimeOut chan<- time.Duration) {
	defer conn.Close()
	var x *Exchange
	for {
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, frame); err != nil {
			return
		}
		key, ver := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
		corr := frame[4:8]
		idLen := int(int16(binary.BigEndian.Uint16(frame[8:])))
		body := frame[10+max(idLen, 0):]
		var resp kmsg.Response
		switch key {
		case 17:
			req := kmsg.NewPtrSASLHandshakeRequest()
			req.Version = ver
			req.ReadFrom(body)
			r := kmsg.NewPtrSASLHandshakeResponse()
			r.Version = ver
			r.SupportedMechanisms = s.Mechanisms()
			var err error
			if x, err = s.Start(req.Mechanism); err != nil {
				r.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			}
			resp = r
		case 36:
			req := kmsg.NewPtrSASLAuthenticateRequest()
			req.Version = ver
			req.ReadFrom(body)
			r := kmsg.NewPtrSASLAuthenticateResponse()
			r.Version = ver
			reply, done, err := x.Step(req.SASLAuthBytes)
			if err != nil {
				r.ErrorCode = kerr.SaslAuthenticationFailed.Code
				msg := err.Error()
				r.ErrorMessage = &msg
			}
			r.SASLAuthBytes = reply
			if done {
				r.SessionLifetimeMillis = x.SessionLifetime().Milliseconds()
				lifetimeOut <- x.SessionLifetime()
			}
			resp = r
		default:
			r := kmsg.NewPtrMetadataResponse()
			r.Version = ver
			resp = r
		}
		out := resp.AppendTo(append([]byte{0, 0, 0, 0}, corr...))
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		conn.Write(out)
	}
}

// ClientMechanism + Authenticate against our own Server: OAUTHBEARER with
// a token file, and SCRAM.
func TestAuthenticateAgainstOwnServer(t *testing.T) {
	k := newRSAKey(t, "k")
	jwks := secretFile(t, string(jwksJSON(t, k)))
	users := writeUsers(t, t.TempDir(), "gw", "pw")
	s, err := NewServer(&configs.ListenerSASL{
		Mechanisms: []string{"OAUTHBEARER", "SCRAM-SHA-512"}, UsersFile: users, MaxReauth: configs.Duration(time.Hour),
		OAuthBearer: &configs.OAuthBearer{JWKSFile: jwks, Issuer: "https://idp.example", Audience: "tollgate", PrincipalClaim: "sub"},
	}, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	lifetimes := make(chan time.Duration, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveSASL(c, s, lifetimes)
		}
	}()
	tok := k.sign(t, goodClaims(20*time.Minute))
	life, err := dialAuth(t, ln.Addr().String(), &configs.UpstreamSASL{Mechanism: "OAUTHBEARER", TokenFile: secretFile(t, tok)})
	if err != nil || life <= 19*time.Minute || life > 20*time.Minute || life != (<-lifetimes).Truncate(time.Millisecond) {
		t.Errorf("OAUTHBEARER: lifetime %v, %v", life, err)
	}
	life, err = dialAuth(t, ln.Addr().String(), &configs.UpstreamSASL{Mechanism: "SCRAM-SHA-512", Username: "gw", PasswordFile: secretFile(t, "pw")})
	if err != nil || life != time.Hour {
		t.Errorf("SCRAM: lifetime %v, %v", life, err)
	}
	<-lifetimes
	_, err = dialAuth(t, ln.Addr().String(), &configs.UpstreamSASL{Mechanism: "SCRAM-SHA-512", Username: "gw", PasswordFile: secretFile(t, "nope")})
	if !errors.Is(err, ErrUpstreamAuth) || !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "invalid credentials") {
		t.Errorf("SCRAM wrong password: %v", err)
	}
	_, err = dialAuth(t, ln.Addr().String(), &configs.UpstreamSASL{Mechanism: "PLAIN", Username: "gw", PasswordFile: secretFile(t, "pw")})
	if !errors.Is(err, kerr.UnsupportedSaslMechanism) {
		t.Errorf("PLAIN (not offered): %v", err)
	}
}

// Authenticate gives up when ctx ends while the broker says nothing.
func TestAuthenticateContext(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go io.Copy(io.Discard, b)
	m, _ := ClientMechanism(&configs.UpstreamSASL{Mechanism: "PLAIN", Username: "u", PasswordFile: secretFile(t, "p")})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Authenticate(ctx, a, m, "h"); err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("Authenticate on a silent peer: %v after %v", err, time.Since(start))
	}
}
