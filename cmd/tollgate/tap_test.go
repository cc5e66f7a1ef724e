package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestTapLine(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 2, 3, 118_000_000, time.UTC)
	acks := int16(-1)
	produce := &audit.Record{Time: at, Event: audit.EventRequest, ClientAddr: "127.0.0.1:51234", ClientID: "console-producer",
		API: "Produce", Key: 0, Version: 9, Acks: &acks, Decision: audit.Forwarded, LatencyMs: 1.2,
		Topics: []audit.Topic{{Name: "quickstart-events", Partitions: []audit.Partition{{Partition: 0, Records: 1, Bytes: 27, Offset: 3}}}}}
	fetch := &audit.Record{Time: at, Event: audit.EventRequest, ClientAddr: "127.0.0.1:51235", ClientID: "console-consumer",
		API: "Fetch", Key: 1, Version: 12, Decision: audit.Forwarded, LatencyMs: 501,
		Topics: []audit.Topic{{Name: "orders", Partitions: []audit.Partition{{Partition: 0, Offset: 10, Records: 4, Bytes: 2048}}}}}
	denied := &audit.Record{Time: at, Event: audit.EventRequest, ClientAddr: "10.0.0.1:1", ClientID: "admin-tool",
		API: "CreateTopics", Key: 19, Version: 5, Decision: audit.Denied, Rule: "no-admin-from-outside",
		Topics: []audit.Topic{{Name: "new"}}, Resources: []string{"topic:new"}}
	failed := &audit.Record{Time: at, Event: audit.EventRequest, ClientAddr: "10.0.0.1:2", ClientID: "c",
		API: "JoinGroup", Key: 11, Version: 9, Group: "billing", Decision: audit.Throttled, ThrottleMs: 120,
		ErrorCodes: []int16{kerr.MemberIDRequired.Code, 999}, LatencyMs: 2500}
	closed := &audit.Record{Time: at, Event: audit.EventDisconnect, ClientAddr: "10.0.0.1:2", ClientID: "c", CloseReason: "idle_timeout"}
	cases := []struct {
		rec  *audit.Record
		want string
	}{
		{produce, "10:02:03.118 127.0.0.1:51234 console-producer  Produce v9  quickstart-events[0] 1 rec 27 B, acks=-1  → ok offset 3  1.2 ms"},
		{fetch, "10:02:03.118 127.0.0.1:51235 console-consumer  Fetch v12  orders[0]@10  → ok 4 rec 2.0 KiB  501.0 ms"},
		{denied, "10:02:03.118 10.0.0.1:1 admin-tool  CreateTopics v5  new  → denied by no-admin-from-outside"},
		{failed, "10:02:03.118 10.0.0.1:2 c  JoinGroup v9  group=billing  → throttled 120 ms MEMBER_ID_REQUIRED error 999  2.50 s"},
		{closed, "10:02:03.118 10.0.0.1:2 c disconnect (idle_timeout)"},
	}
	for _, tc := range cases {
		if got := tapLine(tc.rec, time.UTC); got != tc.want {
			t.Errorf("tapLine:\ngot  %s\nwant %s", got, tc.want)
		}
	}
}

func TestTapURL(t *testing.T) {
	u, err := tapURL("127.0.0.1:9099", map[string]string{"api": "Produce", "topic": "orders*", "client": ""})
	if err != nil || u != "http://127.0.0.1:9099/tap?api=Produce&topic=orders%2A" {
		t.Fatalf("tapURL = %q, %v", u, err)
	}
	if _, err := tapURL("http://", nil); err == nil {
		t.Fatal("empty host accepted")
	}
}

// syncWriter guards a buffer written by runTap and read by the test.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestTapCommand runs the tap command against an admin server fed with
// records, with filters, in both output forms.
func TestTapCommand(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr, err := audit.New(configs.Default().Audit, metrics.New(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	admin, err := metrics.NewAdmin("127.0.0.1:0", reg, nil, tr)
	if err != nil {
		t.Fatal(err)
	}
	admin.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		admin.Shutdown(ctx)
	}()

	mk := func(corr int32, key int16, client, topic string) *audit.Record {
		return &audit.Record{Time: time.Now(), Event: audit.EventRequest, ClientAddr: "127.0.0.1:4000", Key: key,
			API: audit.APIName(key), Version: 9, Correlation: corr, ClientID: client, Decision: audit.Forwarded,
			Topics: []audit.Topic{{Name: topic, Partitions: []audit.Partition{{Partition: 0, Records: 1, Bytes: 10, Offset: int64(corr)}}}}}
	}
	for _, asJSON := range []bool{false, true} {
		args := []string{"--admin", admin.Addr().String(), "--api", "Produce", "--topic", "orders", "--client", "console*", "--count", "2"}
		if asJSON {
			args = append(args, "--json")
		}
		var out, errOut syncWriter
		done := make(chan int, 1)
		go func() { done <- runTap(context.Background(), args, &out, &errOut) }()
		// The level turns full once the tap's subscription is in place.
		deadline := time.Now().Add(10 * time.Second)
		for tr.Level() != audit.Full {
			if time.Now().After(deadline) {
				t.Fatalf("tap never subscribed; stderr: %s", errOut.String())
			}
			time.Sleep(2 * time.Millisecond)
		}
		tr.Log(mk(1, 1, "console-consumer", "orders")) // wrong API
		tr.Log(mk(2, 0, "console-producer", "orders"))
		tr.Log(mk(3, 0, "kcat", "orders")) // wrong client
		tr.Log(mk(4, 0, "console-producer", "payments"))
		tr.Log(mk(5, 0, "console-producer", "orders"))
		select {
		case code := <-done:
			if code != 0 {
				t.Fatalf("tap exited %d: %s", code, errOut.String())
			}
		case <-time.After(10 * time.Second):
			t.Fatal("tap did not stop after --count records")
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 2 {
			t.Fatalf("tap printed %d lines, want 2:\n%s", len(lines), out.String())
		}
		for i, corr := range []int64{2, 5} {
			if asJSON {
				var r audit.Record
				if err := json.Unmarshal([]byte(lines[i]), &r); err != nil || int64(r.Correlation) != corr {
					t.Fatalf("json line %d = %s (%v)", i, lines[i], err)
				}
				continue
			}
			if !strings.Contains(lines[i], "console-producer  Produce v9  orders[0] 1 rec 10 B  → ok offset "+strconv.FormatInt(corr, 10)) {
				t.Fatalf("line %d = %s", i, lines[i])
			}
		}
		// Wait for the subscription to end before the next round.
		deadline = time.Now().Add(10 * time.Second)
		for tr.Level() != audit.Off {
			if time.Now().After(deadline) {
				t.Fatal("subscription left open after tap exited")
			}
			tr.Log(mk(9, 3, "x", "y")) // a write notices the closed connection
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func TestTapConnectError(t *testing.T) {
	var out, errOut syncWriter
	if code := runTap(context.Background(), []string{"--admin", "127.0.0.1:1"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "connect to the admin server") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	if code := runTap(context.Background(), []string{"extra"}, &out, &errOut); code != 2 {
		t.Fatalf("stray argument: exit %d", code)
	}
}
