//go:build linux

package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// The kernel fixes it at 100 for user space on every mainstream
// architecture, whatever CONFIG_HZ is (see proc(5), "times(2)"), so it is a
// constant here rather than a cgo call to sysconf(_SC_CLK_TCK).
const clockTicks = 100

// procUsage is the CPU time and memory of a process at one moment.
type procUsage struct {
	cpuSeconds float64 // utime + stime, all threads
	rssBytes   int64   // VmRSS
	hwmBytes   int64   // VmHWM: peak resident set since the process started
}

// readProc samples /proc/<pid>/stat and /proc/<pid>/status.
func readProc(pid int) (procUsage, error) {
	var u procUsage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may contain spaces,
	// so fields are counted from the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return u, fmt.Errorf("parse stat of pid %d: no command name", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return u, fmt.Errorf("parse stat of pid %d: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return u, fmt.Errorf("parse stat of pid %d: utime %q stime %q", pid, f[11], f[12])
	}
	u.cpuSeconds = float64(ut+st) / clockTicks

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("read status of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return u, fmt.Errorf("parse %s of pid %d: %w", k, pid, err)
		}
		if k == "VmRSS" {
			u.rssBytes = kb << 10
		} else {
			u.hwmBytes = kb << 10
		}
	}
	return u, nil
}

// dieWithParent makes the child get SIGKILL if the benchmark process dies
// without closing its stdin (a crash or kill -9).
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// datasync is fdatasync(2): the disk probe's flush per write, as the
// built-in broker's with fsync=always.
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
