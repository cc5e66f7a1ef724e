//go:build !linux

package bench

import (
	"errors"
	"os"
	"os/exec"
)

type procUsage struct {
	cpuSeconds float64
	rssBytes   int64
	hwmBytes   int64
}

var errNoProc = errors.New("per-process CPU and RSS are read from /proc, which this OS lacks")

func readProc(int) (procUsage, error) { return procUsage{}, errNoProc }

func dieWithParent(*exec.Cmd) {}

// datasync is f.Sync where there is no fdatasync(2).
func datasync(f *os.File) error { return f.Sync() }
