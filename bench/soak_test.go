package bench

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestSoakSmoke runs the soak suite for a few seconds with the gateway in
// a child process and checks that samples were taken and records moved on
// every path of the load (no timing thresholds; the verdict is reported,
// not checked).
func TestSoakSmoke(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RSS comes from /proc")
	}
	opts := Options{Duration: 8 * time.Second, Brokers: 1, Partitions: 3, Rate: 500, Command: testCommand}
	var progress, stderr bytes.Buffer
	opts.Progress, opts.ChildStderr = &progress, &stderr
	defer func() { t.Logf("progress:\n%s\nchild stderr:\n%s", progress.String(), stderr.String()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := RunSoak(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Samples) < 3 {
		t.Fatalf("%d samples, want at least 3", len(rep.Samples))
	}
	for _, s := range rep.Samples {
		if s.RSSBytes <= 0 || s.Goroutines <= 0 {
			t.Fatalf("sample %+v: no RSS or goroutine count", s)
		}
	}
	if rep.Produced == 0 || rep.Consumed == 0 || rep.GroupConsumed == 0 {
		t.Fatalf("records did not move: produced %d, consumed %d, group consumed %d (first produce error %q)",
			rep.Produced, rep.Consumed, rep.GroupConsumed, rep.FirstProduceError)
	}
	if rep.Joins < 2 || rep.Leaves < 1 {
		t.Fatalf("%d joins, %d leaves: the group did not churn", rep.Joins, rep.Leaves)
	}
	if len(rep.Series) != 2 {
		t.Fatalf("series %+v", rep.Series)
	}
	var table, js bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"goroutines", "verdict:", "rss_bytes"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if !strings.Contains(js.String(), `"samples"`) {
		t.Errorf("JSON lacks samples:\n%s", js.String())
	}
	t.Logf("\n%s", table.String())
}

// TestSoakVerdict checks the last-third/first-third medians on fixed series.
func TestSoakVerdict(t *testing.T) {
	mk := func(rss ...int64) []SoakSample {
		var ss []SoakSample
		for _, r := range rss {
			ss = append(ss, SoakSample{RSSBytes: r, Goroutines: 10})
		}
		return ss
	}
	flat := &SoakReport{Samples: mk(100, 110, 90, 105, 100, 95, 100, 120, 98)}
	flat.summarize()
	if !flat.Flat || flat.Series[0].Ratio != 1 {
		t.Fatalf("flat series: %+v", flat.Series)
	}
	growing := &SoakReport{Samples: mk(100, 100, 100, 150, 150, 150, 200, 200, 200)}
	growing.summarize()
	if growing.Flat || growing.Series[0].Ratio != 2 || !growing.Series[1].Flat {
		t.Fatalf("growing series: %+v", growing.Series)
	}
	short := &SoakReport{Samples: append(mk(1, 1, 1, 1, 1), mk(100, 100)...)}
	for i := range 5 {
		short.Samples[i].Warmup = true
	}
	short.summarize()
	if short.Flat {
		t.Fatal("two samples after the warm-up give no verdict")
	}
}

func TestParseGoroutines(t *testing.T) {
	in := "# HELP go_goroutines Number of goroutines that currently exist.\n# TYPE go_goroutines gauge\ngo_goroutines 42\ngo_threads 7\n"
	if n, err := parseGoroutines(strings.NewReader(in)); err != nil || n != 42 {
		t.Fatalf("got %d, %v", n, err)
	}
	if _, err := parseGoroutines(strings.NewReader("go_threads 7\n")); err == nil {
		t.Fatal("no go_goroutines: want an error")
	}
	if _, err := parseGoroutines(strings.NewReader("go_goroutines x\n")); err == nil {
		t.Fatal("bad value: want an error")
	}
}
