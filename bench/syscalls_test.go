package bench

import (
	"os"
	"testing"
)

func TestParsePerfStat(t *testing.T) {
	out := "# started on Fri Dec  4 19:31:34 2026\n\n" +
		"1234,,raw_syscalls:sys_enter,3000000000,100.00,,\n" +
		"56,,syscalls:sys_enter_read,3000000000,100.00,,\n" +
		"<not counted>,,syscalls:sys_enter_splice,0,0.00,,\n"
	got, err := parsePerfStat([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if got["all"] != 1234 || got["read"] != 56 || len(got) != 2 {
		t.Fatalf("parsed %v", got)
	}
	if _, err := parsePerfStat([]byte("# nothing\n")); err == nil {
		t.Fatal("empty perf output parsed without an error")
	}
}

func TestPerfStatPacketEvents(t *testing.T) {
	out := "7,,net:net_dev_xmit,1,100.00,,\n5,,sock:sk_data_ready,1,100.00,,\n"
	got, err := parsePerfStat([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if got["xmit"] != 7 || got["data_ready"] != 5 {
		t.Fatalf("parsed %v", got)
	}
	// A tracepoint the kernel lacks is dropped where tracefs shows what
	// it has (perf stat would refuse the whole list); system calls stay.
	ev := availableEvents([]string{"raw_syscalls:sys_enter", "nosuchsystem:nosuchevent"})
	if len(ev) == 0 || ev[0] != "raw_syscalls:sys_enter" {
		t.Fatalf("available events %v", ev)
	}
	_, err1 := os.Stat("/sys/kernel/tracing/events")
	_, err2 := os.Stat("/sys/kernel/debug/tracing/events")
	if (err1 == nil || err2 == nil) && len(ev) != 1 {
		t.Fatalf("tracefs present, unknown event kept: %v", ev)
	}
}
