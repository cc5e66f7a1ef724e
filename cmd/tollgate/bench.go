package main

import (
	"fmt"
	"io"
)

// benchMoved answers `tollgate bench`: the benchmark is its own command
// so that the product binary links neither kfake nor the benchmark
// clients.
func benchMoved(stderr io.Writer) int {
	fmt.Fprintln(stderr, "tollgate: the benchmark is its own command now: go run ./cmd/tollgate-bench [flags] (see README, Performance)")
	return 2
}
