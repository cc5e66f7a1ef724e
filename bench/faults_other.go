//go:build !linux

package bench

import (
	"context"
	"errors"
	"io"
	"time"
)

// SuiteFaults: the gateway under faults (RunFaults; Linux only).
const SuiteFaults Suite = "faults"

// FaultsConfig sizes a fault run (see faults.go; Linux only).
type FaultsConfig struct {
	Tollgate   string
	Dir        string
	Faults     []string
	Modes      []string
	Cycles     int
	Hold       time.Duration
	StopFor    time.Duration
	MoveEvery  time.Duration
	Moves      int
	Producers  int
	Consumers  int
	Partitions int32
	Log        io.Writer

	NetFor, BlackholeFor time.Duration
}

// FaultResult is one fault in one listener mode.
type FaultResult struct {
	Fault, Mode                                                       string
	Cycles                                                            int
	Acknowledged, Lost, Duplicated, Reordered, ClientErrors           int64
	Unacked, Unconsumed, Redelivered, Retried, DataLoss, CommitErrors int64
	Recovery, Outage                                                  time.Duration
	Errors                                                            []string

	Impairment string
}

// OK is false off Linux: nothing ran.
func (FaultResult) OK() bool { return false }

// FaultsReport is RunFaults' outcome.
type FaultsReport struct {
	Config  FaultsConfig
	Results []FaultResult
}

// Met is false off Linux.
func (r *FaultsReport) Met() bool { return false }

// RunFaults needs Linux (process groups, SIGSTOP, Pdeathsig).
func RunFaults(context.Context, FaultsConfig) (*FaultsReport, error) {
	return nil, errors.New("the fault suite runs on Linux only")
}
