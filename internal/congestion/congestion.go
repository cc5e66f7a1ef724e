// Package congestion is TCP congestion control on this host: Check and
// Set for the gateway's limits.tcp_congestion_control and the benchmark
// relay's --tcp-congestion, and, for their tests, which algorithm to set
// so that it differs from the host's default (Alternative) and which
// algorithm ss(8) reports on given sockets (Of).
package congestion

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// Alternative returns the host's default algorithm, one other than it
// that this process may set (reno, built into every kernel, or cubic where
// reno is the default: the host must have it and, without root, allow it
// in tcp_allowed_congestion_control) and every algorithm the host has.
// The error says why there is none to test with: no /proc, only the
// default, or not allowed.
func Alternative() (host, alt string, known []string, err error) {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	if err != nil {
		return "", "", nil, fmt.Errorf("read the host's congestion control: %w", err)
	}
	host = strings.TrimSpace(string(raw))
	avail, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil {
		return "", "", nil, fmt.Errorf("read the host's congestion controls: %w", err)
	}
	known = strings.Fields(string(avail))
	alt = "reno"
	if host == "reno" {
		alt = "cubic"
	}
	if !slices.Contains(known, alt) {
		return "", "", nil, fmt.Errorf("the host has only %v: no algorithm other than its default %q to set", known, host)
	}
	if os.Geteuid() != 0 {
		allowed, err := os.ReadFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
		if err != nil || !slices.Contains(strings.Fields(string(allowed)), alt) {
			return "", "", nil, fmt.Errorf("%q is not in tcp_allowed_congestion_control (%s), and this process is not root", alt, strings.TrimSpace(string(allowed)))
		}
	}
	return host, alt, known, nil
}

// ErrNoSS means ss (iproute2) is not installed.
var ErrNoSS = errors.New("no ss (iproute2, installed by make deps): cannot read a socket's congestion control")

// Of returns the congestion control of every established TCP socket that
// `ss -tin` lists for filter (an ss filter such as "dst 127.0.0.1:9092"):
// the word of each socket's -i line that is one of the known algorithms,
// "" where none is.
func Of(ctx context.Context, filter string, known []string) ([]string, error) {
	if _, err := exec.LookPath("ss"); err != nil {
		return nil, ErrNoSS
	}
	args := append([]string{"-Htin", "state", "established"}, strings.Fields(filter)...)
	out, err := exec.CommandContext(ctx, "ss", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("ss %s: %w", strings.Join(args, " "), err)
	}
	var algs []string
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" || (line[0] != ' ' && line[0] != '\t') {
			continue // a socket's address line; its -i line is indented
		}
		alg := ""
		for _, w := range strings.Fields(line) {
			if slices.Contains(known, w) {
				alg = w
				break
			}
		}
		algs = append(algs, alg)
	}
	return algs, nil
}
