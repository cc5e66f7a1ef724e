package bench

import "testing"

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
