//go:build linux

package gateway

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The moves round in the namespace: the helper produces and consumes
// nsMove and, at fixed points, asks the test (netnsAskTag) to move every
// partition's leader to the next broker or to move every coordinator;
// the test does it on kfake and answers. The moves are deterministic (no
// timer) and happen while the helper's requests are in flight.
const (
	nsMove             = "ns-move"
	nsMoveRecords      = 60
	nsMoveEvery        = 15 // records produced between two leader moves
	askMoveLeaders     = "move-leaders"
	askMoveCoordinator = "move-coordinators"
)

// netnsMovesResult is what the moves round reports.
type netnsMovesResult struct {
	LeaderMoves      int
	CoordinatorMoves int
	ProduceErrors    []string
	Missing          []int // records never read
	Duplicated       []int // records read more than once
	Committed        int64 // sum of the group's committed offsets
}

// answerMoves answers the helper's requests to move leaders and
// coordinators on c.
func answerMoves(c *kfake.Cluster) func(string) (string, error) {
	round := int32(0)
	return func(ask string) (string, error) {
		switch ask {
		case askMoveLeaders:
			round++
			for p := range int32(3) {
				if err := c.MoveTopicPartition(nsMove, p, (p+round)%3); err != nil {
					return "", fmt.Errorf("move %s[%d]: %w", nsMove, p, err)
				}
			}
		case askMoveCoordinator:
			c.RehashCoordinators()
		default:
			return "", fmt.Errorf("unknown request %q", ask)
		}
		return "done", nil
	}
}

func (r *netnsMovesResult) check(t *testing.T) {
	t.Helper()
	if r.LeaderMoves < nsMoveRecords/nsMoveEvery || r.CoordinatorMoves < 2 {
		t.Errorf("leaders moved %d times, coordinators %d: the round did not exercise the moves", r.LeaderMoves, r.CoordinatorMoves)
	}
	if len(r.ProduceErrors) > 0 {
		t.Errorf("%d produces failed during leader moves, first: %s", len(r.ProduceErrors), r.ProduceErrors[0])
	}
	if len(r.Missing)+len(r.Duplicated) > 0 {
		t.Errorf("records missing %v, read more than once %v: want each exactly once", r.Missing, r.Duplicated)
	}
	if r.Committed != nsMoveRecords {
		t.Errorf("committed offsets sum to %d, want %d", r.Committed, nsMoveRecords)
	}
}

// netnsMoves: an idempotent producer keeps producing while the leaders
// move, then a classic group consumes and commits while the coordinators
// move; every record arrives exactly once.
func netnsMoves(ctx context.Context, t *testing.T, seed string) netnsMovesResult {
	var res netnsMovesResult
	answers := bufio.NewReader(os.Stdin)
	ask := func(what string) {
		fmt.Printf("%s%s\n", netnsAskTag, what)
		if _, err := answers.ReadString('\n'); err != nil {
			t.Fatalf("no answer to %s: %v", what, err)
		}
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic(nsMove), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range nsMoveRecords {
		if i > 0 && i%nsMoveEvery == 0 {
			ask(askMoveLeaders)
			res.LeaderMoves++
		}
		wg.Add(1)
		prod.Produce(ctx, kgo.StringRecord(strconv.Itoa(i)), func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				res.ProduceErrors = append(res.ProduceErrors, err.Error())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	ask(askMoveLeaders) // the consumer starts on moved leaders too
	res.LeaderMoves++
	netnsConsumeWhileCoordinatorsMove(ctx, t, seed, ask, &res)
	return res
}

func netnsConsumeWhileCoordinatorsMove(ctx context.Context, t *testing.T, seed string, ask func(string), res *netnsMovesResult) {
	cons, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.ConsumeTopics(nsMove), kgo.ConsumerGroup("ns-moves"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(2000))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[int]int{}
	for total := 0; total < nsMoveRecords; {
		fs := cons.PollRecords(ctx, 10)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d: %v", total, nsMoveRecords, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			v, _ := strconv.Atoi(string(r.Value))
			got[v]++
			total++
		})
		if err := cons.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit offsets while coordinators move: %v", err)
		}
		ask(askMoveCoordinator) // the next commit and heartbeat find the coordinator moved
		res.CoordinatorMoves++
	}
	for i := range nsMoveRecords {
		switch {
		case got[i] == 0:
			res.Missing = append(res.Missing, i)
		case got[i] > 1:
			res.Duplicated = append(res.Duplicated, i)
		}
	}
	offs, err := kadm.NewClient(cons).FetchOffsets(ctx, "ns-moves")
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	offs.Each(func(o kadm.OffsetResponse) { res.Committed += o.At })
}
