package console_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate-kafka/tollgate/console"
)

// TestBrokerReasonsShown: a keyless record to a compacted topic and a
// trim of a compacted topic name the broker's reason, not only the
// error's generic text.
func TestBrokerReasonsShown(t *testing.T) {
	b := builtin(t, "")
	run(t, console.Topic, b.addr, "", "create", "keys", "-p", "1", "-c", "cleanup.policy=compact").ok(t, "create")
	r := run(t, console.Produce, b.addr, "no key\n", "keys")
	const reason = "Compacted topic cannot accept message without key in topic partition keys-0."
	if r.code != console.ExitFailed || !strings.Contains(r.err, "line 1: INVALID_RECORD") || !strings.Contains(r.err, reason) {
		t.Errorf("keyless produce to a compacted topic: exit %d, stderr:\n%s\nwant %q", r.code, r.err, reason)
	}
	run(t, console.Produce, b.addr, "k:v\n", "keys", "-k", ":").ok(t, "keyed produce")
	run(t, console.Produce, b.addr, "k:v\n", "keys", "-k", ":", "--acks", "0", "--no-idempotent").ok(t, "acks=0 produce (no reasons to read)")
	run(t, console.Topic, b.addr, "", "trim", "keys", "--to", "end").oneLineError(t, "trim compacted", console.ExitFailed,
		"POLICY_VIOLATION: Request parameters do not satisfy the configured policy. (cleanup.policy=compact topics cannot be trimmed")
}

// TestTopicIDsAsKafkaPrintsThem: topic ids are URL-safe base64 without
// padding (Kafka's Uuid.toString), in create, list and describe.
func TestTopicIDsAsKafkaPrintsThem(t *testing.T) {
	b := builtin(t, "")
	var created []struct{ ID string }
	out := run(t, console.Topic, b.addr, "", "create", "ids", "-p", "1", "--format", "json").ok(t, "create").out
	if err := json.Unmarshal([]byte(out), &created); err != nil || len(created) != 1 {
		t.Fatalf("create json %q: %v", out, err)
	}
	tds, err := kadmFor(t, b.addr).ListTopics(context.Background(), "ids")
	if err != nil {
		t.Fatal(err)
	}
	id := tds["ids"].ID
	want := base64.RawURLEncoding.EncodeToString(id[:])
	var listed []struct{ ID string }
	if err := json.Unmarshal([]byte(run(t, console.Topic, b.addr, "", "list", "--format", "json").ok(t, "list").out), &listed); err != nil {
		t.Fatal(err)
	}
	desc := run(t, console.Topic, b.addr, "", "describe", "ids").ok(t, "describe").out
	if created[0].ID != want || listed[0].ID != want || !strings.Contains(desc, "ID: "+want+" ") {
		t.Fatalf("topic id printed as create %q, list %q, describe %q; Kafka prints %q", created[0].ID, listed[0].ID, desc, want)
	}
}

// TestConsumeYAML: --format yaml (listed by every command's help) prints
// one YAML document per record with -f json's fields.
func TestConsumeYAML(t *testing.T) {
	b := builtin(t, "")
	run(t, console.Produce, b.addr, "k1:one\nk2:two\n", "yaml", "-k", ":").ok(t, "produce")
	out := run(t, console.Consume, b.addr, "", "yaml", "-e", "--format", "yaml").ok(t, "consume --format yaml").out
	dec := yaml.NewDecoder(strings.NewReader(out))
	var got []string
	for {
		var rec struct{ Key, Value string }
		if err := dec.Decode(&rec); err != nil {
			break
		}
		got = append(got, rec.Key+"="+rec.Value)
	}
	if strings.Join(got, ",") != "k1=one,k2=two" {
		t.Fatalf("yaml records %v from:\n%s", got, out)
	}
}

// TestPartitionsCounted: "1 partition", not "1 partitions".
func TestPartitionsCounted(t *testing.T) {
	b := builtin(t, "")
	if out := run(t, console.Topic, b.addr, "", "create", "one", "-p", "1").ok(t, "create").out; out != "created one (1 partition, replication factor 1)\n" {
		t.Errorf("create: %q", out)
	}
	if out := run(t, console.Topic, b.addr, "", "add-partitions", "one", "1").ok(t, "add").out; out != "added 1 partition to one\n" {
		t.Errorf("add-partitions: %q", out)
	}
}

// TestProduceVerbose: -v prints each record's line, partition and offset,
// in line order, and they are where consume finds the records.
func TestProduceVerbose(t *testing.T) {
	for i, start := range backends(t) {
		t.Run([]string{"builtin", "gateway"}[i], func(t *testing.T) {
			b := start(t)
			run(t, console.Topic, b.addr, "", "create", "where", "-p", "3").ok(t, "create")
			out := run(t, console.Produce, b.addr, "a:1\nb:2\nc:3\nd:4\n", "where", "-k", ":", "-v").ok(t, "produce -v").out
			at := map[string]string{} // key -> "where[p] offset o"
			for _, rec := range strings.Split(strings.TrimSpace(run(t, console.Consume, b.addr, "", "where", "-e", "-f", "json").ok(t, "consume").out), "\n") {
				var r jsonRecord
				if err := json.Unmarshal([]byte(rec), &r); err != nil {
					t.Fatal(err)
				}
				at[*r.Key] = fmt.Sprintf("where[%d] offset %d", r.Partition, r.Offset)
			}
			want := fmt.Sprintf("line 1: %s\nline 2: %s\nline 3: %s\nline 4: %s\n", at["a"], at["b"], at["c"], at["d"])
			if out != want {
				t.Fatalf("produce -v printed:\n%s\nconsume found:\n%s", out, want)
			}
			var sum struct {
				Produced int
				Records  []struct {
					Line      int
					Partition int32
					Offset    int64
				}
			}
			js := run(t, console.Produce, b.addr, "e:5\n", "where", "-k", ":", "-v", "--format", "json").ok(t, "produce -v json").out
			if err := json.Unmarshal([]byte(js), &sum); err != nil || sum.Produced != 1 || len(sum.Records) != 1 || sum.Records[0].Line != 1 {
				t.Fatalf("produce -v --format json: %q %v", js, err)
			}
			if quiet := run(t, console.Produce, b.addr, "f:6\n", "where", "-k", ":").ok(t, "produce").out; quiet != "" {
				t.Fatalf("produce without -v printed %q", quiet)
			}
		})
	}
}
