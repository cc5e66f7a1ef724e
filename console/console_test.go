package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/tollgate-kafka/tollgate/console"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTopicsProduceConsume runs the topic, produce and consume commands
// against the built-in broker and through a gateway in front of kfake,
// and checks every answer with kadm or kgo.
func TestTopicsProduceConsume(t *testing.T) {
	for i, start := range backends(t) {
		t.Run([]string{"builtin", "gateway"}[i], func(t *testing.T) {
			b := start(t)
			run(t, console.Topic, b.addr, "", "create", "orders", "-p", "3", "-c", "retention.ms=3600000").ok(t, "create")
			tds, err := kadmFor(t, b.addr).ListTopics(context.Background(), "orders")
			if err != nil || len(tds["orders"].Partitions) != 3 {
				t.Fatalf("created topic: %v %v", tds, err)
			}
			list := run(t, console.Topic, b.addr, "", "list", "--format", "json").ok(t, "list")
			var topics []struct {
				Name       string
				Partitions int
			}
			if err := json.Unmarshal([]byte(list.out), &topics); err != nil || len(topics) != 1 || topics[0].Partitions != 3 {
				t.Fatalf("list json %q: %v", list.out, err)
			}

			lines := "k1:one\nk2:two\nk3:three\nk4:four\n"
			run(t, console.Produce, b.addr, lines, "orders", "-k", ":", "-H", "src=test").ok(t, "produce")
			run(t, console.Produce, b.addr, "p2-a\np2-b\n", "orders", "-p", "2", "--acks", "1", "--no-idempotent", "--compression", "zstd").ok(t, "produce -p")

			all := run(t, console.Consume, b.addr, "", "orders", "-e").ok(t, "consume -e")
			if got := strings.Fields(all.out); len(got) != 6 {
				t.Fatalf("consume -e printed %q, want 6 values", all.out)
			}
			js := run(t, console.Consume, b.addr, "", "orders", "-p", "2", "-e", "-f", "json").ok(t, "consume json")
			var recs []jsonRecord
			for _, l := range strings.Split(strings.TrimSpace(js.out), "\n") {
				var r jsonRecord
				if err := json.Unmarshal([]byte(l), &r); err != nil {
					t.Fatalf("json line %q: %v", l, err)
				}
				recs = append(recs, r)
			}
			last := recs[len(recs)-1]
			if last.Partition != 2 || *last.Value != "p2-b" || last.Key != nil {
				t.Fatalf("last record of partition 2: %+v", last)
			}
			tail := run(t, console.Consume, b.addr, "", "orders", "-p", "2", "-o", "-1", "-e", "-f", `%p/%o %v\n`).ok(t, "consume -1")
			if want := fmt.Sprintf("2/%d p2-b\n", last.Offset); tail.out != want {
				t.Fatalf("consume -o -1 = %q, want %q", tail.out, want)
			}
			keyed := run(t, console.Consume, b.addr, "", "orders", "-e", "-f", `%k=%v %h\n`).ok(t, "consume keyed")
			if !strings.Contains(keyed.out, "k3=three src=test\n") {
				t.Fatalf("keys and headers: %q", keyed.out)
			}

			run(t, console.Topic, b.addr, "", "alter-config", "orders", "--set", "retention.ms=7200000").ok(t, "alter-config")
			rc, err := kadmFor(t, b.addr).DescribeTopicConfigs(context.Background(), "orders")
			if err != nil {
				t.Fatal(err)
			}
			if c, err := rc.On("orders", nil); err != nil || configValue(c, "retention.ms") != "7200000" {
				t.Fatalf("retention.ms after alter-config: %q %v", configValue(c, "retention.ms"), err)
			}
			run(t, console.Topic, b.addr, "", "add-partitions", "orders", "2").ok(t, "add-partitions")
			if tds, _ := kadmFor(t, b.addr).ListTopics(context.Background(), "orders"); len(tds["orders"].Partitions) != 5 {
				t.Fatalf("partitions after add-partitions: %d", len(tds["orders"].Partitions))
			}
			run(t, console.Topic, b.addr, "", "trim", "orders", "-p", "2", "--to", "-1").ok(t, "trim")
			starts, _ := kadmFor(t, b.addr).ListStartOffsets(context.Background(), "orders")
			if s, _ := starts.Lookup("orders", 2); s.Offset != last.Offset {
				t.Fatalf("log start of partition 2 after trim --to -1: %d, want %d", s.Offset, last.Offset)
			}
			desc := run(t, console.Topic, b.addr, "", "describe", "orders").ok(t, "describe")
			if !strings.Contains(desc.out, "retention.ms=7200000") || !strings.Contains(desc.out, "PARTITION  LEADER") {
				t.Fatalf("describe:\n%s", desc.out)
			}
			run(t, console.Topic, b.addr, "", "delete", "orders").ok(t, "delete")
			if tds, _ := kadmFor(t, b.addr).ListTopics(context.Background()); len(tds) != 0 {
				t.Fatalf("topics after delete: %v", tds.Names())
			}
		})
	}
}

// jsonRecord is the shape of a `consume -f json` line.
type jsonRecord struct {
	Partition int32
	Offset    int64
	Key       *string
	Value     *string
}

func configValue(rc kadm.ResourceConfig, key string) string {
	for _, c := range rc.Configs {
		if c.Key == key {
			return c.MaybeValue()
		}
	}
	return ""
}

// kadmFor is a fresh admin client (kgo caches metadata per client, and
// the checks must see what the commands just changed).
func kadmFor(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// TestGolden pins the text tables and the JSON of topic describe, topic
// list and group describe on the built-in broker.
func TestGolden(t *testing.T) {
	b := builtin(t, "")
	run(t, console.Topic, b.addr, "", "create", "golden", "-p", "2", "-c", "retention.ms=86400000").ok(t, "create")
	run(t, console.Produce, b.addr, "a\nb\nc\n", "golden", "-p", "0").ok(t, "produce")
	// Partition 1 gets its record only after the group has read two:
	// otherwise which partitions the two come from depends on the fetches.
	run(t, console.Consume, b.addr, "", "golden", "-g", "golden-group", "-n", "2").ok(t, "consume -g")
	run(t, console.Produce, b.addr, "d\n", "golden", "-p", "1").ok(t, "produce")

	golden(t, "topic_list.txt", run(t, console.Topic, b.addr, "", "list").ok(t, "list").out)
	// Sizes depend on the batches' varint timestamp deltas: checked to be
	// there, not pinned.
	desc := run(t, console.Topic, b.addr, "", "describe", "golden").ok(t, "describe").out
	golden(t, "topic_describe.txt", regexp.MustCompile(`(?m)  [1-9]\d*$`).ReplaceAllString(desc, "  SIZE"))
	descJSON := run(t, console.Topic, b.addr, "", "describe", "golden", "--format", "json").ok(t, "describe json").out
	golden(t, "topic_describe.json", regexp.MustCompile(`"size_bytes": [1-9]\d*`).ReplaceAllString(descJSON, `"size_bytes": SIZE`))
	golden(t, "group_describe.txt", run(t, console.Group, b.addr, "", "describe", "golden-group").ok(t, "group describe").out)
	golden(t, "group_describe.json", run(t, console.Group, b.addr, "", "describe", "golden-group", "--format", "json").ok(t, "group json").out)
	golden(t, "group_list.yaml", run(t, console.Group, b.addr, "", "list", "--format", "yaml").ok(t, "group list yaml").out)
	golden(t, "group_seek.txt", run(t, console.Group, b.addr, "", "seek", "golden-group", "--to", "start").ok(t, "seek").out)
}

// TestGroupLagMatchesKadm: the lag `group describe` prints equals what
// kadm computes, on both backends, including on truncated logs
// (DeleteRecords): a committed partition truncated past its commit (lag
// = end - commit, as Kafka's tools say) and an uncommitted one (lag = end
// - log start, not end - 0).
func TestGroupLagMatchesKadm(t *testing.T) {
	for i, start := range backends(t) {
		t.Run([]string{"builtin", "gateway"}[i], func(t *testing.T) {
			b := start(t)
			run(t, console.Topic, b.addr, "", "create", "lag", "-p", "3").ok(t, "create")
			run(t, console.Produce, b.addr, strings.Repeat("x\n", 10), "lag", "-p", "0").ok(t, "produce 0")
			run(t, console.Produce, b.addr, strings.Repeat("y\n", 4), "lag", "-p", "1").ok(t, "produce 1")
			run(t, console.Consume, b.addr, "", "lag", "-g", "lagger", "-n", "5").ok(t, "consume -g")
			run(t, console.Produce, b.addr, strings.Repeat("z\n", 6), "lag", "-p", "2").ok(t, "produce 2")
			run(t, console.Topic, b.addr, "", "trim", "lag", "-p", "0", "--to", "8").ok(t, "trim 0")
			run(t, console.Topic, b.addr, "", "trim", "lag", "-p", "2", "--to", "4").ok(t, "trim 2")

			got := groupJSON(t, b.addr, "lagger")
			lags, err := kadmFor(t, b.addr).Lag(context.Background(), "lagger")
			if err != nil {
				t.Fatal(err)
			}
			want := lags["lagger"].Lag
			if got.TotalLag != want.Total() {
				t.Errorf("total lag %d, kadm %d", got.TotalLag, want.Total())
			}
			seen := map[int32]bool{}
			for _, p := range got.Partitions {
				seen[p.Partition] = true
				k, ok := want.Lookup(p.Topic, p.Partition)
				if !ok || k.Lag != p.Lag {
					t.Errorf("%s[%d] lag %d, kadm %d", p.Topic, p.Partition, p.Lag, k.Lag)
				}
				switch {
				case p.Partition == 0 && p.CurrentOffset != nil:
					if p.LogStartOffset != 8 || p.Lag != 10-*p.CurrentOffset {
						t.Errorf("truncated committed partition: %+v, want log start 8, lag end - commit", p)
					}
				case p.Partition == 2:
					if p.CurrentOffset != nil || p.LogStartOffset != 4 || p.Lag != 2 {
						t.Errorf("truncated uncommitted partition: %+v, want no commit, log start 4, lag 2", p)
					}
				}
			}
			if !seen[2] {
				t.Errorf("the uncommitted partition is missing: %+v", got.Partitions)
			}
		})
	}
}

func groupJSON(t *testing.T, addr, group string) console.GroupDescription {
	t.Helper()
	r := run(t, console.Group, addr, "", "describe", group, "--format", "json").ok(t, "group describe")
	var d console.GroupDescription
	if err := json.Unmarshal([]byte(r.out), &d); err != nil {
		t.Fatalf("%q: %v", r.out, err)
	}
	return d
}

// TestGroupSeek: a dry run commits nothing, --execute commits, and a group
// with an active member is refused.
func TestGroupSeek(t *testing.T) {
	for i, start := range backends(t) {
		t.Run([]string{"builtin", "gateway"}[i], func(t *testing.T) {
			b := start(t)
			run(t, console.Topic, b.addr, "", "create", "seek", "-p", "1").ok(t, "create")
			run(t, console.Produce, b.addr, strings.Repeat("r\n", 10), "seek").ok(t, "produce")
			run(t, console.Consume, b.addr, "", "seek", "-g", "seeker", "-n", "6").ok(t, "consume -g")
			if d := groupJSON(t, b.addr, "seeker"); *d.Partitions[0].CurrentOffset != 6 {
				t.Fatalf("committed after printing 6: %+v", d.Partitions[0])
			}
			dry := run(t, console.Group, b.addr, "", "seek", "seeker", "--to", "-4").ok(t, "dry run")
			if !strings.Contains(dry.out, "dry run") || *groupJSON(t, b.addr, "seeker").Partitions[0].CurrentOffset != 6 {
				t.Fatalf("dry run committed or did not say so: %q", dry.out)
			}
			run(t, console.Group, b.addr, "", "seek", "seeker", "--to", "-4", "--execute").ok(t, "execute")
			if d := groupJSON(t, b.addr, "seeker"); *d.Partitions[0].CurrentOffset != 2 {
				t.Fatalf("after seek -4: %+v", d.Partitions[0])
			}

			cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumerGroup("seeker"), kgo.ConsumeTopics("seek"))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cl.PollFetches(ctx) // joined and consuming
			run(t, console.Group, b.addr, "", "seek", "seeker", "--to", "start", "--execute").oneLineError(t, "seek active group", console.ExitFailed, "active members")
			run(t, console.Group, b.addr, "", "delete", "seeker").oneLineError(t, "delete active group", console.ExitFailed, "NON_EMPTY_GROUP")
		})
	}
}

// TestBadInput: every mistake is one line on stderr and a distinct exit
// code, with nothing changed.
func TestBadInput(t *testing.T) {
	b := builtin(t, `
policy:
  rules:
    - { name: no-deletes, match: { api: [DeleteTopics] }, action: deny }
`)
	run(t, console.Topic, b.addr, "", "create", "kept", "-p", "1").ok(t, "create")
	cases := []struct {
		name string
		cmd  func(context.Context, []string, console.IO) int
		args []string
		code int
		want string
	}{
		{"unknown topic describe", console.Topic, []string{"describe", "nope"}, console.ExitFailed, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"unknown topic consume", console.Consume, []string{"nope", "-e"}, console.ExitFailed, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"bad offset", console.Consume, []string{"kept", "-o", "+-3"}, console.ExitUsage, `offset "+-3"`},
		{"bad timestamp", console.Consume, []string{"kept", "-o", "@yesterday"}, console.ExitUsage, `offset "@yesterday"`},
		{"bad seek offset", console.Group, []string{"seek", "g", "--to", "sideways"}, console.ExitUsage, `offset "sideways"`},
		{"bad partition", console.Consume, []string{"kept", "-p", "x"}, console.ExitUsage, `partition "x"`},
		{"missing partition", console.Consume, []string{"kept", "-p", "7", "-e"}, console.ExitFailed, "partition 7"},
		{"bad format string", console.Consume, []string{"kept", "-f", "%q"}, console.ExitUsage, "unknown %q"},
		{"bad config", console.Topic, []string{"create", "x", "-c", "retention.ms"}, console.ExitUsage, "want key=value"},
		{"bad acks", console.Produce, []string{"kept", "--acks", "1"}, console.ExitUsage, "--no-idempotent"},
		{"unknown flag", console.Topic, []string{"list", "--frobnicate"}, console.ExitUsage, "frobnicate"},
		{"unknown subcommand", console.Group, []string{"explode"}, console.ExitUsage, `unknown subcommand "explode"`},
		{"denied", console.Topic, []string{"delete", "kept"}, console.ExitFailed, "TOPIC_AUTHORIZATION_FAILED"},
		{"unknown group", console.Group, []string{"describe", "nobody"}, console.ExitFailed, "nobody"},
		{"bad format", console.Topic, []string{"list", "--format", "xml"}, console.ExitUsage, "--format"},
	}
	for _, tc := range cases {
		run(t, tc.cmd, b.addr, "", tc.args...).oneLineError(t, tc.name, tc.code, tc.want)
	}
	run(t, console.Topic, "127.0.0.1:1", "", "list").oneLineError(t, "unreachable", console.ExitUnreachable, "cannot reach any broker at 127.0.0.1:1")
	run(t, console.Produce, "127.0.0.1:1", "x\n", "kept").oneLineError(t, "unreachable produce", console.ExitUnreachable, "cannot reach any broker")
	if tds, _ := kadmFor(t, b.addr).ListTopics(context.Background()); len(tds) != 1 {
		t.Errorf("topics after the bad commands: %v", tds.Names())
	}
}

// TestConsumeGroupCommitsWhatItPrinted: -g -n N commits exactly the N
// records printed, and the next run continues from there.
func TestConsumeGroupCommitsWhatItPrinted(t *testing.T) {
	b := builtin(t, "")
	run(t, console.Produce, b.addr, "1\n2\n3\n4\n5\n", "seq").ok(t, "produce")
	first := run(t, console.Consume, b.addr, "", "seq", "-g", "g", "-n", "2").ok(t, "first")
	second := run(t, console.Consume, b.addr, "", "seq", "-g", "g", "-e").ok(t, "second")
	if first.out != "1\n2\n" || second.out != "3\n4\n5\n" {
		t.Fatalf("first %q second %q", first.out, second.out)
	}
}

// TestReadCommitted: --read-committed skips an aborted transaction's
// records and -e still ends (the abort marker marks the end).
func TestReadCommitted(t *testing.T) {
	b := builtin(t, "")
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("txn"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		v := map[kgo.TransactionEndTry]string{kgo.TryCommit: "committed", kgo.TryAbort: "aborted"}[commit]
		if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	rc := run(t, console.Consume, b.addr, "", "txn", "--read-committed", "-e").ok(t, "read committed")
	ru := run(t, console.Consume, b.addr, "", "txn", "-e").ok(t, "read uncommitted")
	if rc.out != "committed\n" || ru.out != "committed\naborted\n" {
		t.Fatalf("read committed %q, uncommitted %q", rc.out, ru.out)
	}
}

func TestHelp(t *testing.T) {
	for _, cmd := range []func(context.Context, []string, console.IO) int{console.Topic, console.Group} {
		r := run(t, cmd, "", "", "--help")
		if r.code != 0 || !strings.Contains(r.err, "usage: tollgate") {
			t.Errorf("help: %d %q", r.code, r.err)
		}
	}
	for _, cmd := range []func(context.Context, []string, console.IO) int{console.Produce, console.Consume} {
		r := run(t, cmd, "", "", "-h")
		if r.code != 0 || !strings.Contains(r.err, "usage: tollgate") || !strings.Contains(r.err, "-brokers") {
			t.Errorf("help: %d %q", r.code, r.err)
		}
	}
}

// TestProduceReportsFailures: records the cluster refuses (a policy
// denial through the gateway) are named by line on stderr and the exit
// code is 1; the records of an allowed topic are all written.
func TestProduceReportsFailures(t *testing.T) {
	b := throughGateway(t, `
policy:
  rules:
    - { name: read-only, match: { api: [Produce], topic: read-only }, action: deny }
`)
	run(t, console.Topic, b.addr, "", "create", "read-only", "-p", "1").ok(t, "create")
	r := run(t, console.Produce, b.addr, "one\ntwo\n", "read-only")
	if r.code != console.ExitFailed || !strings.Contains(r.err, "line 1: TOPIC_AUTHORIZATION_FAILED") ||
		!strings.Contains(r.err, "line 2: TOPIC_AUTHORIZATION_FAILED") || !strings.Contains(r.err, "2 of 2 records failed") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.err)
	}
	if hw := b.kfake.PartitionInfo("read-only", 0).HighWatermark; hw != 0 {
		t.Fatalf("denied records reached the upstream: high watermark %d", hw)
	}
	// kfake does not create topics on Metadata: an unknown topic is one
	// line, not a retry until the timeout.
	run(t, console.Produce, b.addr, "x\n", "writable").oneLineError(t, "unknown topic", console.ExitFailed, "UNKNOWN_TOPIC_OR_PARTITION")
	run(t, console.Topic, b.addr, "", "create", "writable", "-p", "1").ok(t, "create")
	ok := run(t, console.Produce, b.addr, "one\ntwo\n", "writable", "--format", "json").ok(t, "allowed produce")
	var sum struct{ Produced, Failed int }
	if err := json.Unmarshal([]byte(ok.out), &sum); err != nil || sum.Produced != 2 || sum.Failed != 0 {
		t.Fatalf("summary %q: %v", ok.out, err)
	}
}
