package audit

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaSink is a sink that produces every record (one JSON line) to a
// Kafka topic, so that the trail can be read with Kafka tools. Write
// returns once every record of the batch is acknowledged; a failed batch
// is an error, which strict mode retries whole (so delivery is at least
// once: a retried batch may repeat records that had been written).
// Records carry no key and are spread over the topic's partitions; the
// time field orders them.
type KafkaSink struct {
	cl      *kgo.Client
	topic   string
	timeout time.Duration
}

// kafkaSinkTimeout bounds one batch (a write that takes longer fails,
// and best-effort drops the batch).
const kafkaSinkTimeout = 30 * time.Second

// NewKafkaSink connects lazily: the first Write dials the brokers opts
// name.
func NewKafkaSink(topic string, opts ...kgo.Opt) (*KafkaSink, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.ClientID("tollgate-audit"), kgo.DefaultProduceTopic(topic),
		kgo.AllowAutoTopicCreation(), kgo.RecordRetries(5)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("audit kafka sink: %w", err)
	}
	return &KafkaSink{cl: cl, topic: topic, timeout: kafkaSinkTimeout}, nil
}

// Write produces each line of p as one record. An empty write (the
// trail's open probe) sends nothing.
func (k *KafkaSink) Write(p []byte) (int, error) {
	lines := bytes.Split(bytes.TrimSuffix(p, []byte{'\n'}), []byte{'\n'})
	recs := make([]*kgo.Record, 0, len(lines))
	for _, l := range lines {
		if len(l) > 0 {
			recs = append(recs, &kgo.Record{Topic: k.topic, Value: l})
		}
	}
	if len(recs) == 0 {
		return len(p), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), k.timeout)
	defer cancel()
	if err := k.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return 0, fmt.Errorf("produce audit records to %s: %w", k.topic, err)
	}
	return len(p), nil
}

// Close closes the client.
func (k *KafkaSink) Close() error {
	k.cl.Close()
	return nil
}
