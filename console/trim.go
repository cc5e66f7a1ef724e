package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// topicTrim is `topic trim`: DeleteRecords up to an offset per partition.
func topicTrim(ctx context.Context, c *common, f *topicFlags, pos []string, std IO) error {
	if len(pos) != 1 {
		return usagef("trim needs one topic name")
	}
	spec, err := parseTrimTo(f.to)
	if err != nil {
		return err
	}
	only, err := parsePartitions(f.parts)
	if err != nil {
		return err
	}
	adm, err := c.admin(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	topic := pos[0]
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return topicErr(topic, err)
	}
	if _, ok := ends[topic]; !ok {
		return topicErr(topic, nil)
	}
	offs := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) {
		if only != nil && !only[o.Partition] {
			return
		}
		offs.Add(kadm.Offset{Topic: topic, Partition: o.Partition, At: spec.resolve(0, 0, o.Offset, -1), LeaderEpoch: -1})
	})
	if len(offs) == 0 {
		return usagef("trim: topic %s has none of partitions %s", topic, f.parts)
	}
	resps, err := adm.DeleteRecords(ctx, offs)
	if err != nil {
		return fmt.Errorf("trim %s: %w", topic, err)
	}
	type row struct {
		Partition      int32  `json:"partition"`
		LogStartOffset int64  `json:"log_start_offset"`
		Error          string `json:"error,omitempty"`
	}
	var rows []row
	var errs []error
	for _, p := range sortedPartitions(resps[topic]) {
		r := resps[topic][p]
		rw := row{Partition: p, LogStartOffset: r.LowWatermark}
		if r.Err != nil {
			err := trimErr(r.Err)
			rw.Error = err.Error()
			errs = append(errs, fmt.Errorf("%s[%d]: %w", topic, p, err))
		}
		rows = append(rows, rw)
	}
	if err := c.emit(std.Out, rows, func(w io.Writer) error {
		t := newTable("PARTITION", "LOG-START-OFFSET", "ERROR")
		for _, r := range rows {
			t.row(r.Partition, r.LogStartOffset, r.Error)
		}
		return t.write(w)
	}); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// trimErr explains a refusal DeleteRecords has no message field for:
// Kafka answers POLICY_VIOLATION for a partition whose cleanup.policy
// lacks delete (Partition.deleteRecordsOnLeader: "Records of partition
// ... can not be deleted due to the configured policy").
func trimErr(err error) error {
	if errors.Is(err, kerr.PolicyViolation) {
		return fmt.Errorf("%w (cleanup.policy=compact topics cannot be trimmed: DeleteRecords needs cleanup.policy to include delete)", err)
	}
	return err
}

// parseTrimTo accepts N, end, or -N (keep the last N records).
func parseTrimTo(s string) (OffsetSpec, error) {
	if s == "" {
		return OffsetSpec{}, usagef("trim needs --to N|end|-N")
	}
	o, err := parseOffset(s)
	if err != nil {
		return o, err
	}
	switch o.kind {
	case offAbsolute, offEnd:
		return o, nil
	case offBefore:
		// For seek, -N shifts the committed offset; for trim it counts
		// back from the end.
		return OffsetSpec{kind: offTrimKeep, n: o.n}, nil
	}
	return OffsetSpec{}, usagef("trim --to %q: want N, end or -N", s)
}

// parsePartitions parses "0,1,2" (nil: all).
func parsePartitions(s string) (map[int32]bool, error) {
	if s == "" {
		return nil, nil
	}
	out := map[int32]bool{}
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		if err != nil || n < 0 {
			return nil, usagef("partition %q: want a partition number (comma-separated list)", p)
		}
		out[int32(n)] = true
	}
	return out, nil
}

func sortedPartitions[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
