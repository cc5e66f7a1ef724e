# The two commands the README promises:
#   make run    the gateway on the built-in broker (127.0.0.1:9092, data in ./tollgate-data)
#   make test   everything CI runs: deps, vet, the race-enabled suite, short fuzz runs
GO      ?= go
FUZZTIME ?= 2000x

.PHONY: run test deps vet unit fuzz bench build docker kgo-suite

run:
	$(GO) run ./cmd/tollgate

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o tollgate ./cmd/tollgate

# kcat (librdkafka) is a real peer in the tests, chromium the browser of
# the web console's tests; install them when missing.
deps:
	@command -v kcat >/dev/null 2>&1 || { \
	  echo "installing kcat"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq kcat; }
	@# headless Chromium renders the web console in package webui's tests
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium; }
	$(GO) mod download
	@# the egress tests tunnel through real forward proxies: tinyproxy
	@# (HTTP CONNECT) and dante-server (danted, SOCKS5)
	@{ command -v tinyproxy && command -v danted; } >/dev/null 2>&1 || { \
	  echo "installing tinyproxy dante-server"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq tinyproxy dante-server; }
	@# the TLS bench suite's smoke test runs haproxy as its reference
	@# TLS-terminating relay (skipped with a message when missing)
	@command -v haproxy >/dev/null 2>&1 || { \
	  echo "installing haproxy"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq haproxy; }
	@# the network-namespace test (root only) firewalls its namespace with
	@# nftables, and builds it with ip (iproute2)
	@{ command -v nft && command -v ip; } >/dev/null 2>&1 || { \
	  echo "installing nftables iproute2"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq nftables iproute2; }
	@# the network faults (bench/netimpair, root only) delay and reorder
	@# packets through an iptables NFQUEUE rule where the kernel has no
	@# tc netem
	@command -v iptables >/dev/null 2>&1 || { \
	  echo "installing iptables"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq iptables; }

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The benchmark package's smoke tests run its child processes for real
# and assert that records moved; they run without the race detector (and
# after the rest), which would only slow those children down.
unit:
	$(GO) test -race -count=1 -timeout 20m $$($(GO) list ./... | grep -v /bench$$)
	$(GO) test -count=1 -timeout 15m ./bench

# Every fuzz target runs briefly on top of its seed corpus in testdata/.
# The budget is a count of executions, not a duration: Go 1.26's coordinator
# can report "context deadline exceeded" at a -fuzztime deadline with no
# crasher (golang/go#75804), and CI must not fail by itself. A real crasher
# still fails the step.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
	    echo "fuzz $$pkg $$t ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

test: deps vet unit fuzz

# franz-go's own kgo integration tests through the tollgate binary, on the
# built-in broker and on a 3-broker kfake (port-per-broker, single-port):
# a peer suite, about 4 minutes, not part of `make test`
# (bench/kgo_suite_test.go; KGO_SUITE_MODES picks modes).
KGO_SUITE_MODES ?= 1
kgo-suite:
	TOLLGATE_KGO_SUITE=$(KGO_SUITE_MODES) $(GO) test -count=1 -run '^TestKgoSuite$$' -v -timeout 60m ./bench

# The benchmark is its own command (the product binary links no kfake);
# the broker suite measures a built tollgate binary.
bench:
	$(GO) run ./cmd/tollgate-bench

docker:
	docker build -t tollgate .
