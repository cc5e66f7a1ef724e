package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/configs"
)

// The overhead suites compare tollgate with itself: the same workloads
// through several gateway processes that differ only in their
// configuration file (policy rules, audit level), all in front of one
// kfake, alternating run by run in one invocation. The yardstick is the
// suite's baseline variant (no policy; audit off), and a ratio is the
// median of per-round ratios, as in the gateway suite. The variant order
// rotates from round to round, so no variant always runs first or last
// in a round.
//
// Every variant is checked to be in force, or the suite fails:
//
//   - policy: the last rule of each rule set is a sentinel that denies
//     only a probe client (API-key rules: its client id; topic rules: its
//     topic), never the benchmark's clients. Before the rounds the probe
//     produces through every variant: denied where rules are loaded,
//     accepted through the no-policy gateway. Evaluation is in order, so
//     a benchmark request walks every rule before the default allows it.
//   - audit: after the rounds, the audit file of summary and full is
//     non-empty and no file exists for off; the gateway's own counters
//     (records written and dropped) are reported.

// Suite names a benchmark mode of `tollgate-bench --suite`.
type Suite string

const (
	SuiteGateway Suite = "gateway" // direct vs relay vs tollgate (Run)
	SuitePolicy  Suite = "policy"  // tollgate with 0, 10 and 100 rules
	SuiteAudit   Suite = "audit"   // tollgate with audit off, summary, full
	SuiteBroker  Suite = "broker"  // built-in broker vs kfake (RunBroker)
	SuiteTLS     Suite = "tls"     // tollgate with a TLS listener vs plaintext (RunTLSSuite)
	// SuiteSinglePort: brokers: single-port vs port-per-broker (RunSuite).
	SuiteSinglePort Suite = "single-port"
	// SuiteVC: a virtual cluster vs the plain gateway (RunSuite; suite_vc.go).
	SuiteVC Suite = "vc"
)

// Suites lists the suites in the order the command documents them.
var Suites = []Suite{SuiteGateway, SuitePolicy, SuiteAudit, SuiteTLS, SuiteSinglePort, SuiteVC, SuiteBroker, SuiteSoak}

// ErrUnknownSuite is returned for a suite name RunSuite does not run.
var ErrUnknownSuite = errors.New("unknown suite")

// SuiteWorkloads are the default workloads of the overhead suites: the
// fastest produce path (where per-request gateway work shows most) and
// consume.
var SuiteWorkloads = []string{"produce-1k-acks1", "consume"}

// probeName is the client id and topic of the policy probe; rule sets end
// with a rule that denies it, and nothing else.
const probeName = "tollgate-bench-probe"

// variant is one gateway configuration of an overhead suite.
type variant struct {
	// tcpCongestion is limits.tcp_congestion_control (Options.TCPCongestion).
	tcpCongestion string
	name          string
	desc          string
	rules         []string // YAML rule entries (each a list item), in order
	audit         string   // off | summary | full ("" = off, no section)
	metrics       bool     // attach the metrics hooks (always, except the bench-only variant)
	// versus is the variant this one's ratios divide by; target is the
	// issue's minimum for that ratio (0: reported, not checked).
	versus string
	target float64
	// cpuTarget is the maximum for the CPU-per-MB ratio over
	// versus (0: reported, not checked).
	cpuTarget float64
	// workloadTargets overrides target for the workloads it names.
	workloadTargets map[string]float64
	// rssTarget is the maximum of the variant's peak RSS over versus's
	// (0: not checked).
	rssTarget float64
	probe     probeWant
	// tls, if set, makes the bench listener TLS with these PEM files, and
	// clientTLS is what the variant's clients dial it with (the TLS suite).
	tls       *configs.ListenerTLS
	clientTLS *tls.Config
	// sni makes the TLS bench listener "brokers: sni" (benchSNIApex and
	// benchSNIBrokers): one port, the broker chosen by the server name.
	sni bool
	// singlePort makes the bench listener "brokers: single-port": the
	// whole cluster as one virtual node, requests split and merged.
	singlePort bool
	// noFetchAhead sets fetch_ahead: false on the single-port listener.
	noFetchAhead bool
	// vcPrefix puts the bench listener's clients in a virtual cluster
	// with this upstream prefix (suite_vc.go).
	vcPrefix string
	// relay, if set, is the haproxy binary of the TLS suite's reference
	// (tls_relay.go): no gateway, a TLS-terminating relay with tls's files.
	relay string
}

type probeWant int

const (
	probeNone    probeWant = iota // not probed (audit suite)
	probeAllowed                  // the probe must get through
	probeDenied                   // the probe must be refused by the policy
)

func suiteVariants(s Suite) ([]variant, error) {
	switch s {
	case SuitePolicy:
		return []variant{
			{name: "none", desc: "no policy section (default allow, no rules)", metrics: true, probe: probeAllowed},
			{name: "api-10", desc: "10 API-key-only rules (listener, address, client_id, principal, api), none matching the benchmark client",
				rules: apiRules(10), metrics: true, versus: "none", probe: probeDenied},
			{name: "api-100", desc: "100 API-key-only rules, none matching the benchmark client",
				rules: apiRules(100), metrics: true, versus: "none", target: 0.90, probe: probeDenied},
			{name: "topic-100", desc: "100 topic rules (exact, prefix, regex, topic_not), none matching the benchmark topics",
				rules: topicRules(100), metrics: true, versus: "none", target: 0.90, probe: probeDenied},
		}, nil
	case SuiteAudit:
		return []variant{
			{name: "off", desc: "audit off (metrics on, as always)", audit: configs.AuditOff, metrics: true},
			{name: "summary", desc: "audit summary to a file (best-effort)", audit: configs.AuditSummary, metrics: true, versus: "off", target: 0.95},
			{name: "full", desc: "audit full to a file (best-effort)", audit: configs.AuditFull, metrics: true, versus: "off", target: 0.85},
			{name: "no-metrics", desc: "audit off, metrics hooks detached: a benchmark-only build of the gateway (no such setting exists)",
				audit: configs.AuditOff, metrics: false},
		}, nil
	case SuiteSinglePort:
		return []variant{
			{name: "port-per-broker", desc: "a port per upstream broker (requests forwarded as bytes)", metrics: true},
			// Issue 22's targets: consume >= 0.95, produce >= 0.9, peak
			// RSS <= 1.5x port-per-broker's.
			{name: "single-port", desc: "brokers: single-port (one port; requests decoded, split by leader, answers merged)",
				metrics: true, versus: "port-per-broker", target: 0.9, workloadTargets: map[string]float64{"consume": 0.95},
				rssTarget: 1.5, singlePort: true},
			// What fetch-ahead buys, side by side.
			{name: "no-fetch-ahead", desc: "brokers: single-port with fetch_ahead: false (each broker asked when the client's Fetch arrives)",
				metrics: true, versus: "port-per-broker", singlePort: true, noFetchAhead: true},
		}, nil
	case SuiteVC:
		return vcVariants(), nil
	}
	return nil, fmt.Errorf("%w %q for RunSuite (want %s, %s, %s or %s)", ErrUnknownSuite, s, SuitePolicy, SuiteAudit, SuiteSinglePort, SuiteVC)
}

// metricsVersus is the ratio that answers "metrics overhead": audit off
// with the hooks over audit off without them. The issue asks for it
// "likewise", which is read here as the summary bar.
const (
	metricsOn      = "off"
	metricsOff     = "no-metrics"
	metricsTarget  = 0.95
	metricsVariant = "metrics on / hooks detached"
)

// apiRules returns n rules that look only at what the request header and
// the connection tell (no body decode), and that never match the
// benchmark's clients (client id "kgo", listener "bench", 127.0.0.1, no
// principal). The last one denies the probe client's Produce requests.
func apiRules(n int) []string {
	var out []string
	for i := range n - 1 {
		var m, action string
		switch i % 6 {
		case 0:
			m = fmt.Sprintf("client_id: {prefix: svc-%03d-}", i)
			action = "deny"
		case 1:
			m = fmt.Sprintf("client_id: [batch-%03d, etl-%03d]\n        api: [produce, consume]", i, i)
			action = "allow"
		case 2:
			m = fmt.Sprintf("client_id: {regex: 'job-%03d-[a-z]+'}", i)
			action = "deny"
		case 3:
			m = fmt.Sprintf("address: [10.%d.0.0/16, 192.168.%d.0/24]", i%256, i%256)
			action = "deny"
		case 4:
			m = fmt.Sprintf("listener: [internal]\n        api: [admin]\n        client_id: {prefix: ops-%03d-}", i)
			action = "allow"
		case 5:
			m = fmt.Sprintf("principal: User:svc-%03d\n        api: [Produce, Fetch]", i)
			action = "deny"
		}
		out = append(out, fmt.Sprintf("- name: api-%03d\n      match:\n        %s\n      action: %s", i, m, action))
	}
	return append(out, fmt.Sprintf("- name: probe\n      match:\n        client_id: %s\n        api: [Produce]\n      action: deny", probeName))
}

// topicRules returns n rules on topics that never match the benchmark's
// topics ("bench-..."); the last denies the probe topic. The gateway has
// to decode the topics of every Produce and Fetch to evaluate them.
func topicRules(n int) []string {
	var out []string
	for i := range n - 1 {
		var m, action string
		switch i % 4 {
		case 0:
			m = fmt.Sprintf("topic: orders-%03d", i)
			action = "deny"
		case 1:
			m = fmt.Sprintf("topic: {prefix: team-%03d.}\n        api: [produce]", i)
			action = "deny"
		case 2:
			m = fmt.Sprintf("topic: {regex: 'logs-%03d-[0-9]+'}", i)
			action = "allow"
		case 3:
			m = fmt.Sprintf("topic: {prefix: secret-%03d.}\n        topic_not: {prefix: secret-%03d.public.}", i, i)
			action = "deny"
		}
		out = append(out, fmt.Sprintf("- name: topic-%03d\n      match:\n        %s\n      action: %s", i, m, action))
	}
	return append(out, fmt.Sprintf("- name: probe\n      match:\n        topic: %s\n      action: deny", probeName))
}

// configYAML is the file a variant's gateway reads: two listeners (the
// benchmark's and one the listener rules name), kfake as the upstream,
// the admin server off, and the variant's policy and audit sections.
func (v variant) configYAML(upstreams []string, auditFile string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# written by tollgate-bench: variant %s (%s)\n", v.name, v.desc)
	b.WriteString("listeners:\n")
	switch {
	case v.tls != nil && v.sni:
		fmt.Fprintf(&b, "  - {name: bench, listen: 127.0.0.1:0, brokers: sni, sni: {bootstrap_host: %s, broker_host: %q}, tls: {cert: %q, key: %q}}\n",
			benchSNIApex, benchSNIBrokers, v.tls.Cert, v.tls.Key)
	case v.singlePort:
		fmt.Fprintf(&b, "  - {name: bench, listen: 127.0.0.1:0, brokers: single-port, fetch_ahead: %t}\n", !v.noFetchAhead)
	case v.tls != nil:
		fmt.Fprintf(&b, "  - {name: bench, listen: 127.0.0.1:0, broker_port_base: 0, tls: {cert: %q, key: %q}}\n", v.tls.Cert, v.tls.Key)
	default:
		b.WriteString("  - {name: bench, listen: 127.0.0.1:0, broker_port_base: 0}\n")
	}
	b.WriteString("  - {name: internal, listen: 127.0.0.1:0, broker_port_base: 0}\n")
	fmt.Fprintf(&b, "upstream:\n  bootstrap: [%s]\n", strings.Join(upstreams, ", "))
	b.WriteString("admin:\n  listen: \"off\"\nlog:\n  level: warn\n")
	// Every benchmark client dials from 127.0.0.1, and the connection loop
	// opens thousands of connections a second: lift the per-address caps.
	b.WriteString("limits:\n  max_connections_per_address: 0\n  connection_rate_per_address: 0\n")
	if v.tcpCongestion != "" {
		fmt.Fprintf(&b, "  tcp_congestion_control: %s\n", v.tcpCongestion)
	}
	if len(v.rules) > 0 {
		b.WriteString("policy:\n  default: allow\n  rules:\n")
		for _, r := range v.rules {
			fmt.Fprintf(&b, "    %s\n", r)
		}
	}
	if v.vcPrefix != "" {
		fmt.Fprintf(&b, "virtual_clusters:\n  - {name: %s, match: {listener: bench}, prefix: %q}\n", vcName, v.vcPrefix)
	}
	if v.audit != "" {
		fmt.Fprintf(&b, "audit:\n  level: %s\n", v.audit)
		if v.audit != configs.AuditOff {
			fmt.Fprintf(&b, "  sink: {file: %q}\n  mode: best-effort\n", auditFile)
		}
	}
	return b.String()
}

// RunSuite runs the policy or the audit suite (see above). Options are
// those of Run; Workloads defaults to SuiteWorkloads, and CPUProfile
// profiles the gateway of the suite's heaviest variant (policy: topic-100;
// audit: full).
func RunSuite(ctx context.Context, suite Suite, opts Options) (*SuiteReport, error) {
	vs, err := suiteVariants(suite)
	if err != nil {
		return nil, err
	}
	profiled := map[Suite]string{SuitePolicy: "topic-100", SuiteAudit: "full", SuiteSinglePort: "single-port", SuiteVC: "vcluster"}[suite]
	sr := suiteRun{suite: suite, variants: vs, profiled: profiled}
	if suite == SuiteVC {
		sr.started = vcInForce
	}
	return runSuite(ctx, sr, opts)
}

// suiteRun is what distinguishes one overhead suite from another for
// runSuite: the variants, and what the suite does around the rounds.
type suiteRun struct {
	suite    Suite
	variants []variant
	profiled string // the variant whose gateway CPUProfile profiles
	// prepare runs once the work directory exists, before any gateway
	// starts, and may fill in the variants (the TLS suite writes its
	// certificates there).
	prepare func(dir string, vs []variant) error
	// started runs once every gateway listens, before the warm-up;
	// measured after the rounds, while the gateways still run. vars is
	// keyed by variant name; rep.Variants is in the order of variants.
	started  func(ctx context.Context, vars map[string]*variantEnv, rep *SuiteReport) error
	measured func(ctx context.Context, vars map[string]*variantEnv, rep *SuiteReport) error
}

func runSuite(ctx context.Context, sr suiteRun, opts Options) (*SuiteReport, error) {
	suite, vs := sr.suite, sr.variants
	var err error
	if len(opts.Workloads) == 0 {
		opts.Workloads = SuiteWorkloads
	}
	opts.setDefaults()
	var ws []workload
	for _, name := range opts.Workloads {
		w, ok := findWorkload(name)
		if !ok {
			return nil, fmt.Errorf("%w %q (have %s)", ErrUnknownWorkload, name, strings.Join(WorkloadNames(), ", "))
		}
		ws = append(ws, w)
	}
	if opts.CPUProfile != "" && opts.Command == nil {
		return nil, errors.New("a CPU profile of the gateway needs the gateway in a child process (Options.Command)")
	}
	dir := opts.WorkDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "tollgate-bench-"+string(suite)+"-"); err != nil {
			return nil, fmt.Errorf("suite work directory: %w", err)
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("suite work directory: %w", err)
	}
	if sr.prepare != nil {
		if err := sr.prepare(dir, vs); err != nil {
			return nil, err
		}
	}

	cluster, err := newUpstream(opts.Brokers)
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	defer cluster.Close()
	b := &bencher{opts: opts, upstreams: cluster.ListenAddrs(), cluster: cluster}
	for _, v := range vs {
		if v.vcPrefix != "" {
			b.consumePrefixes = append(b.consumePrefixes, v.vcPrefix)
		}
	}
	if len(b.consumePrefixes) > 0 {
		b.consumePrefixes = append([]string{""}, b.consumePrefixes...)
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(b.upstreams...))
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	defer admin.Close()
	b.admin = kadm.NewClient(admin)

	rep := &SuiteReport{
		Suite: suite, Brokers: opts.Brokers, Partitions: opts.Partitions, Rounds: opts.Rounds,
		DurationSec: opts.Duration.Seconds(), WarmupSec: opts.Warmup.Seconds(),
		ChildProcesses: opts.Command != nil, LoadAvgStart: loadAvg(), TCP: tcpSetting("the gateways'", opts.TCPCongestion),
	}
	vars := make(map[string]*variantEnv, len(vs))
	defer func() {
		for _, ve := range vars {
			ve.stop()
		}
	}()
	for _, v := range vs {
		ve, err := b.startVariant(v, dir, v.name == sr.profiled)
		if err != nil {
			return nil, fmt.Errorf("variant %s: %w", v.name, err)
		}
		vars[v.name] = ve
		rep.Variants = append(rep.Variants, ve.info)
	}
	if suite == SuitePolicy {
		if err := b.createTopic(ctx, probeName, 1, nil); err != nil {
			return nil, err
		}
		for i, v := range vs {
			if err := vars[v.name].probe(ctx, &rep.Variants[i]); err != nil {
				return nil, fmt.Errorf("variant %s: %w", v.name, err)
			}
		}
	}
	if sr.started != nil {
		if err := sr.started(ctx, vars, rep); err != nil {
			return nil, err
		}
	}
	for _, w := range ws {
		rep.Workloads = append(rep.Workloads, WorkloadInfo{Name: w.name, Desc: w.describe(opts)})
		if w.kind == kindConsume && b.consumeEnd == nil {
			if err := b.preloadConsume(ctx); err != nil {
				return nil, err
			}
		}
	}
	// One unmeasured run of each workload through every variant first:
	// the first runs of a process (kfake's and each gateway's heaps and
	// connections growing) would otherwise land in round 1 only.
	saved := b.opts.Duration
	b.opts.Duration = max(b.opts.Warmup, 100*time.Millisecond)
	for _, w := range ws {
		for _, v := range vs {
			if _, err := b.runOne(ctx, w, vars[v.name].env, 0); err != nil {
				b.opts.Duration = saved
				return nil, fmt.Errorf("warm-up %s via %s: %w", w.name, v.name, err)
			}
		}
	}
	b.opts.Duration = saved
	for round := 1; round <= opts.Rounds; round++ {
		for _, w := range ws {
			for i := range vs {
				v := vs[(i+round-1)%len(vs)]
				r, err := b.runOne(ctx, w, vars[v.name].env, round)
				if err != nil {
					return nil, fmt.Errorf("round %d %s via %s: %w", round, w.name, v.name, err)
				}
				fmt.Fprintf(opts.Progress, "round %d/%d %-18s %-10s %s\n", round, opts.Rounds, w.name, v.name, r.brief())
				rep.Runs = append(rep.Runs, r)
			}
		}
	}
	if sr.measured != nil {
		if err := sr.measured(ctx, vars, rep); err != nil {
			return nil, err
		}
	}
	rep.LoadAvgEnd = loadAvg()
	// Stop every gateway (flushing audit trails), then check what each
	// left behind.
	for i, v := range vs {
		ve := vars[v.name]
		if ve.env.child != nil {
			if u, err := ve.env.child.usage(); err == nil {
				rep.Variants[i].PeakRSSBytes = u.hwmBytes
			}
		}
		ve.stop()
		rep.Variants[i].Stats = ve.stats
		if err := ve.checkAudit(&rep.Variants[i]); err != nil {
			return nil, fmt.Errorf("variant %s: %w", v.name, err)
		}
	}
	rep.summarize(vs)
	return rep, nil
}

// variantEnv is a running variant: its gateway and the path its clients
// take.
type variantEnv struct {
	v         variant
	env       *pathEnv
	info      VariantInfo
	auditFile string
	gw        *configured // in-process gateway; nil with a child
	stats     *ChildStats
	stopped   bool
}

func (b *bencher) startVariant(v variant, dir string, profile bool) (*variantEnv, error) {
	vdir := filepath.Join(dir, v.name)
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return nil, fmt.Errorf("variant directory: %w", err)
	}
	if v.relay != "" {
		return b.startHAProxy(v, vdir)
	}
	v.tcpCongestion = b.opts.TCPCongestion
	ve := &variantEnv{v: v, auditFile: filepath.Join(vdir, "audit.log")}
	file := filepath.Join(vdir, "tollgate.yaml")
	if err := os.WriteFile(file, []byte(v.configYAML(b.upstreams, ve.auditFile)), 0o644); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	// Load it here too, so that a bad file fails with its errors before
	// any process starts.
	cfg, err := configs.Load(file)
	if err != nil {
		return nil, err
	}
	ve.info = VariantInfo{Name: v.name, Desc: v.desc, ConfigFile: file, Rules: len(cfg.Policy.Rules),
		Audit: cfg.Audit.Level, Metrics: v.metrics}
	e := &pathEnv{path: Gateway, variant: v.name, tls: v.clientTLS, sni: v.sni, topicPrefix: v.vcPrefix}
	var info childInfo
	if b.opts.Command == nil {
		log := slog.New(slog.NewTextHandler(b.opts.ChildStderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("variant", v.name)
		gw, err := startConfigured(cfg, v.metrics, "", log)
		if err != nil {
			return nil, err
		}
		ve.gw, info = gw, gw.info
	} else {
		args := []string{ChildFlag, string(Gateway), "--config", file}
		if !v.metrics {
			args = append(args, "--no-metrics")
		}
		if profile && b.opts.CPUProfile != "" {
			args = append(args, "--cpuprofile", b.opts.CPUProfile)
			ve.info.Profiled = true
		}
		c, err := spawnChildArgs(b.opts.Command, Gateway, args, b.opts.ChildStderr)
		if err != nil {
			return nil, err
		}
		e.child, info = c, c.info
	}
	upstream := func(a string) bool {
		for _, u := range b.upstreams {
			if u == a {
				return true
			}
		}
		return false
	}
	e.seeds = []string{info.Bootstrap}
	if v.sni {
		_, port, _ := net.SplitHostPort(info.Bootstrap)
		e.seeds = []string{net.JoinHostPort(benchSNIApex, port)}
	}
	e.route = func(a string) (string, error) {
		if upstream(a) {
			return "", fmt.Errorf("%w: tollgate client dialing the upstream %s directly", errOffRoute, a)
		}
		return a, nil
	}
	ve.env = e
	return ve, nil
}

// stop stops the variant's gateway once and keeps its counters.
func (ve *variantEnv) stop() {
	if ve.stopped {
		return
	}
	ve.stopped = true
	if ve.gw != nil {
		ve.stats = ve.gw.stop()
		return
	}
	if c := ve.env.child; c != nil {
		if err := c.stop(); err != nil {
			slog.Warn("bench: stop variant", "variant", ve.v.name, "err", err)
		}
		ve.stats = c.exit.Stats
	}
}

// probe produces one record as the probe client to the probe topic through
// the variant and checks that the policy decided as the variant says.
func (ve *variantEnv) probe(ctx context.Context, info *VariantInfo) error {
	if ve.v.probe == probeNone {
		return nil
	}
	m := &meter{}
	cl, err := ve.env.newClient(m, kgo.ClientID(probeName), kgo.DefaultProduceTopic(probeName),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.RecordDeliveryTimeout(15*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err = cl.ProduceSync(pctx, &kgo.Record{Value: []byte("probe")}).FirstErr()
	denied := errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed)
	switch {
	case err == nil:
		info.Probe = "accepted"
	case denied:
		info.Probe = "denied: " + err.Error()
	default:
		return fmt.Errorf("policy probe: %w", err)
	}
	if want := ve.v.probe == probeDenied; denied != want {
		return fmt.Errorf("policy probe %s through the %s gateway: the configured policy is not in force (%d rules in %s)",
			info.Probe, ve.v.name, info.Rules, info.ConfigFile)
	}
	info.ProbeOK = true
	return nil
}

// checkAudit records what the variant's audit sink holds (the file and
// the rotated files lumberjack keeps beside it) and checks it against the
// level: nothing for off, something for summary and full.
func (ve *variantEnv) checkAudit(info *VariantInfo) error {
	if ve.v.audit == "" {
		return nil
	}
	base := filepath.Base(ve.auditFile)
	ext := filepath.Ext(base)
	entries, err := os.ReadDir(filepath.Dir(ve.auditFile))
	if err != nil {
		return fmt.Errorf("audit directory: %w", err)
	}
	for _, e := range entries {
		// lumberjack names rotated files NAME-TIMESTAMP.EXT.
		if e.Name() != base && !strings.HasPrefix(e.Name(), strings.TrimSuffix(base, ext)+"-") {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return fmt.Errorf("audit file: %w", err)
		}
		info.AuditFiles++
		info.AuditBytes += fi.Size()
	}
	switch {
	case ve.v.audit == configs.AuditOff && info.AuditFiles > 0:
		return fmt.Errorf("audit is off but %d audit file(s) exist beside %s", info.AuditFiles, ve.auditFile)
	case ve.v.audit != configs.AuditOff && info.AuditBytes == 0:
		return fmt.Errorf("audit %s wrote nothing to %s", ve.v.audit, ve.auditFile)
	}
	return nil
}

// tcpSetting names the machine's TCP congestion control and default
// queueing discipline ("" where there is no /proc), and own, the
// algorithm --tcp-congestion set on whose sockets, which the suites
// report: with bbr and no fq qdisc (loopback has none) TCP paces each
// connection itself with high-resolution timers, and the relative figures
// move with it (README, Performance, "TCP congestion control").
func tcpSetting(whose, own string) string {
	cc, err1 := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	q, err2 := os.ReadFile("/proc/sys/net/core/default_qdisc")
	if err1 != nil || err2 != nil {
		return ""
	}
	s := fmt.Sprintf("congestion control %s, default qdisc %s", strings.TrimSpace(string(cc)), strings.TrimSpace(string(q)))
	if own != "" {
		s += fmt.Sprintf("; %s own sockets: %s (--tcp-congestion)", whose, own)
	}
	return s
}

// loadAvg reads the 1, 5 and 15 minute load averages (nil where there is
// no /proc).
func loadAvg() []float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	var l [3]float64
	if _, err := fmt.Sscan(string(raw), &l[0], &l[1], &l[2]); err != nil {
		return nil
	}
	return l[:]
}
