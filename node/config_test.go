package node

import (
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/transport"
)

// fast sets the timings the node's tests run at: a 10 ms tick, heartbeats
// every 50 ms and a 250 ms timeout, faster than a node's (config.Default)
// so that the elections of these tests settle quickly.
func fast(c Config) Config {
	c.Tick, c.HeartbeatInterval, c.HeartbeatTimeout = 10*time.Millisecond, 50*time.Millisecond, 250*time.Millisecond
	return c
}

// The node has no defaults for its configured timings: New refuses a
// config without them, naming each field and its key.
func TestNewRefusesMissingTimings(t *testing.T) {
	in := NewInbox(0)
	_, err := New(Config{Self: Meta{ID: 1}, Algorithm: "bully", Inbox: in, Transport: transport.NewNetwork().Join(1, in),
		NewMembership: func() (Membership, error) { return nil, nil }})
	for _, want := range []string{"Tick (tick)", "HeartbeatInterval (heartbeat-interval)", "HeartbeatTimeout (heartbeat-timeout)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New without timings: %v, want an error naming %s", err, want)
		}
	}
}
