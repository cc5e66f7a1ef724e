package main

import (
	"io"
	"strings"
	"testing"
)

// TestUpstreamProxyFlag: --upstream-proxy sets upstream.proxy, needs an
// upstream, and is validated like the file's field (without printing the
// password).
func TestUpstreamProxyFlag(t *testing.T) {
	cfg, _, err := loadConfig([]string{"--upstream", "k1:9092,k2:9092", "--upstream-proxy", "socks5://u:pw@proxy.corp:1080"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Upstream.Proxy != "socks5://u:pw@proxy.corp:1080" || len(cfg.Upstream.Bootstrap) != 2 {
		t.Errorf("upstream = %+v", cfg.Upstream)
	}
	if _, _, err := loadConfig([]string{"--upstream-proxy", "http://proxy:3128"}, io.Discard); err == nil || !strings.Contains(err.Error(), "needs an upstream") {
		t.Errorf("--upstream-proxy without an upstream: %v", err)
	}
	_, _, err = loadConfig([]string{"--upstream", "k:9092", "--upstream-proxy", "gopher://u:hunter2@proxy:70"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `scheme "gopher"`) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad proxy URL: %v", err)
	}
}
