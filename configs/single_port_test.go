package configs

import "testing"

// TestSinglePortOpensNoBrokerPorts: a single-port listener serves the
// whole cluster at its listen port and opens no broker port, so the ports
// just above it are free for another listener or the admin server.
func TestSinglePortOpensNoBrokerPorts(t *testing.T) {
	yaml := "listeners:\n" +
		"  - name: a\n    listen: 127.0.0.1:9094\n    brokers: single-port\n" +
		"  - name: b\n    listen: 127.0.0.1:9095\n    brokers: single-port\n" +
		"admin: {listen: 127.0.0.1:9096}\n" + up
	if _, err := Parse([]byte(yaml), "t.yaml"); err != nil {
		t.Fatalf("two single-port listeners and the admin port on adjacent ports: %v", err)
	}
	// The bootstrap ports themselves still collide.
	dup := "listeners:\n" +
		"  - name: a\n    listen: 127.0.0.1:9094\n    brokers: single-port\n" +
		"  - name: b\n    listen: 127.0.0.1:9094\n    brokers: single-port\n" + up
	if _, err := Parse([]byte(dup), "t.yaml"); err == nil {
		t.Fatal("two single-port listeners on one port: accepted")
	}
}
