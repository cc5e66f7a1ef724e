package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// The vc suite (issue 21): the same workloads through the plain gateway
// and through a virtual cluster on the same kfake, interleaved round by
// round like the other overhead suites. The virtual cluster's clients
// name their topics as the plain gateway's do; upstream they are stored
// under vcPrefix (topicFor creates them there, preloadConsume writes the
// consume topic under both names, partition by partition alike). The
// issue's targets: throughput >= 0.9x the plain gateway's, CPU per MB
// <= 1.2x.
//
// The virtual cluster is checked to be in force before the warm-up
// (vcInForce): through it, a topic listing shows the probe topic stored
// under the prefix, without the prefix, and not the one stored outside
// it; through the plain gateway both, as stored.

const (
	vcName   = "bench-vc"
	vcPrefix = "bench-vc."
	// The probe topics: one outside the virtual cluster, one inside.
	vcProbeOutside = probeName + "-outside"
	vcProbeInside  = probeName + "-inside"
)

func vcVariants() []variant {
	return []variant{
		{name: "plain", desc: "the plain gateway (no virtual cluster)", metrics: true},
		{name: "vcluster", desc: "the bench listener's clients in a virtual cluster (prefix " + vcPrefix + ": names rewritten both ways, listings filtered)",
			metrics: true, versus: "plain", target: 0.9, cpuTarget: 1.2, vcPrefix: vcPrefix},
	}
}

// vcInForce lists topics through every variant and checks that each
// sees what its configuration says.
func vcInForce(ctx context.Context, vars map[string]*variantEnv, rep *SuiteReport) error {
	// The probe topics are made through the plain gateway, which names
	// topics as they are stored.
	plain, ok := vars["plain"]
	if !ok {
		return fmt.Errorf("vc suite: no plain variant")
	}
	cl, err := plain.env.newClient(&meter{})
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	for _, t := range []string{vcProbeOutside, vcPrefix + vcProbeInside} {
		if r, err := kadm.NewClient(cl).CreateTopic(cctx, 1, 1, nil, t); err != nil || r.Err != nil {
			cancel()
			cl.Close()
			return fmt.Errorf("vc suite: create probe topic %s: %v %v", t, err, r.Err)
		}
	}
	cancel()
	cl.Close()
	for i := range rep.Variants {
		info := &rep.Variants[i]
		ve := vars[info.Name]
		cl, err := ve.env.newClient(&meter{})
		if err != nil {
			return err
		}
		lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		topics, err := kadm.NewClient(cl).ListTopics(lctx)
		cancel()
		cl.Close()
		if err != nil {
			return fmt.Errorf("variant %s: list topics: %w", info.Name, err)
		}
		var probes []string
		for _, n := range topics.Names() {
			if strings.Contains(n, probeName) {
				probes = append(probes, n)
			}
		}
		slices.Sort(probes)
		want := []string{vcPrefix + vcProbeInside, vcProbeOutside}
		if ve.v.vcPrefix != "" {
			want = []string{vcProbeInside}
		}
		info.Probe = "lists " + strings.Join(probes, ", ")
		if !slices.Equal(probes, want) {
			return fmt.Errorf("variant %s lists the probe topics %v, want %v: the virtual cluster is not in force as configured (%s)",
				info.Name, probes, want, info.ConfigFile)
		}
		info.ProbeOK = true
	}
	return nil
}

// addCPUTarget checks the median per-round CPU-per-MB ratio of variant
// over versus against a maximum; with no CPU measured (gateways
// in-process) there is nothing to check.
func (r *SuiteReport) addCPUTarget(workload, variant, versus string, limit float64) {
	for _, c := range r.Ratios {
		if c.Workload != workload || c.Variant != variant || c.Versus != versus || c.CPUPerMB == nil {
			continue
		}
		r.Targets = append(r.Targets, Target{
			Name: "CPU/MB " + variant + "/" + versus + ": " + workload, Goal: fmt.Sprintf("<= %.2f", limit),
			Value: fmt.Sprintf("%.3f", *c.CPUPerMB), Pass: *c.CPUPerMB <= limit,
		})
	}
}
