package console

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// commitTimeout bounds the final offset commit of `consume -g`, which
// runs after the command's context may have been cancelled (Ctrl-C).
const commitTimeout = 10 * time.Second

// plan is where each partition's consumption starts and where it ends
// (for -e), resolved before the consumer starts.
type plan struct {
	start map[string]map[int32]int64
	end   map[string]map[int32]int64
}

// pending is, for -e, the end of every partition that has anything left
// to read.
func (p *plan) pending() map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	for t, ps := range p.end {
		for part, end := range ps {
			if p.start[t][part] < end {
				if out[t] == nil {
					out[t] = map[int32]int64{}
				}
				out[t][part] = end
			}
		}
	}
	return out
}

// planPositions resolves spec (and, with a group, its committed offsets)
// to one start offset per partition, clamped to the log.
func planPositions(ctx context.Context, adm *kadm.Client, topics []string, only map[int32]bool, spec OffsetSpec, f *consumeFlags) (*plan, error) {
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list start offsets: %w", err)
	}
	list := adm.ListEndOffsets
	if f.readCommitted {
		list = adm.ListCommittedOffsets // the last stable offset
	}
	ends, err := list(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	var atTime kadm.ListedOffsets
	if spec.kind == offTime {
		if atTime, err = adm.ListOffsetsAfterMilli(ctx, spec.milli, topics...); err != nil {
			return nil, fmt.Errorf("list offsets after %d: %w", spec.milli, err)
		}
	}
	var committed kadm.OffsetResponses
	if f.group != "" {
		// A group that does not exist yet has committed nothing (kfake
		// says GROUP_ID_NOT_FOUND, Kafka answers with no offsets).
		if committed, err = adm.FetchOffsets(ctx, f.group); err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
			return nil, fmt.Errorf("fetch offsets of group %s: %w", f.group, err)
		}
	}
	pl := &plan{start: map[string]map[int32]int64{}, end: map[string]map[int32]int64{}}
	seen := map[int32]bool{}
	ends.Each(func(e kadm.ListedOffset) {
		if only != nil && !only[e.Partition] {
			return
		}
		seen[e.Partition] = true
		s, _ := starts.Lookup(e.Topic, e.Partition)
		at := int64(-1)
		if o, ok := atTime.Lookup(e.Topic, e.Partition); ok && o.Err == nil {
			at = o.Offset
		}
		from := startOffset(spec, s.Offset, e.Offset, at)
		if c, ok := committed.Lookup(e.Topic, e.Partition); ok && c.Err == nil && c.At >= 0 {
			from = max(s.Offset, min(c.At, e.Offset))
		}
		if pl.start[e.Topic] == nil {
			pl.start[e.Topic], pl.end[e.Topic] = map[int32]int64{}, map[int32]int64{}
		}
		pl.start[e.Topic][e.Partition], pl.end[e.Topic][e.Partition] = from, e.Offset
	})
	for p := range only {
		if !seen[p] {
			return nil, fmt.Errorf("partition %d: no such partition in %v", p, topics)
		}
	}
	return pl, nil
}

// startOffset is where a consumer starts: +N after the start, -N before
// the end, clamped to [start, end].
func startOffset(spec OffsetSpec, start, end, atTime int64) int64 {
	switch spec.kind {
	case offAfter:
		return max(start, min(start+spec.n, end))
	case offBefore:
		return max(start, min(end-spec.n, end))
	}
	return spec.resolve(start, start, end, atTime)
}

// Position resolves spec for one partition as consume does (+N after the
// log start, -N before the end) and returns it with the partition's end
// (high watermark). The web console's messages view uses it.
func Position(ctx context.Context, adm *kadm.Client, topic string, partition int32, spec OffsetSpec) (from, end int64, err error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, 0, fmt.Errorf("list start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, 0, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	s, ok := starts.Lookup(topic, partition)
	e, ok2 := ends.Lookup(topic, partition)
	switch {
	case !ok || !ok2:
		return 0, 0, topicErr(fmt.Sprintf("%s[%d]", topic, partition), nil)
	case s.Err != nil:
		return 0, 0, topicErr(topic, s.Err)
	case e.Err != nil:
		return 0, 0, topicErr(topic, e.Err)
	}
	at := int64(-1)
	if spec.kind == offTime {
		ts, err := adm.ListOffsetsAfterMilli(ctx, spec.milli, topic)
		if err != nil {
			return 0, 0, fmt.Errorf("list offsets of %s after %d: %w", topic, spec.milli, err)
		}
		if o, ok := ts.Lookup(topic, partition); ok && o.Err == nil {
			at = o.Offset
		}
	}
	return startOffset(spec, s.Offset, e.Offset, at), e.Offset, nil
}
