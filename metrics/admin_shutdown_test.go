package metrics

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestAdminShutdownBounded: a handler that never returns cannot hold
// Shutdown past its context; the request's connection is closed, so the
// client sees an error instead of waiting forever.
func TestAdminShutdownBounded(t *testing.T) {
	a, err := NewAdmin("127.0.0.1:0", prometheus.NewRegistry(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	a.Mount("/stuck", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(entered)
		<-release // a handler stuck on something Shutdown does not know of
	}))
	a.Start()
	got := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Timeout: time.Minute}).Get("http://" + a.Addr().String() + "/stuck")
		if err == nil {
			resp.Body.Close()
		}
		got <- err
	}()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler was not reached")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := a.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want the context's deadline", err)
	}
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("the stuck request got a response")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stuck request's connection was not closed by Shutdown")
	}
}
