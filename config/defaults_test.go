package config

import (
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/electord/electord/transport"
)

// Default with an id is a valid configuration, and it is what the flags
// default to: `electord run --id 1` and config.Default() with ID 1 are the
// same node.
func TestDefaultIsTheFlagsDefault(t *testing.T) {
	d := Default()
	d.ID = 1
	if err := d.Validate(); err != nil {
		t.Fatalf("Default() with an id must validate: %v", err)
	}
	c, err := load(t, []string{"--id", "1"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	d.Name = "node-1" // Load names a node after its id
	if len(c.Join) == 0 {
		c.Join = nil // Load leaves an empty list
	}
	if !reflect.DeepEqual(c, d) {
		t.Fatalf("loaded from the default flags:\n%+v\nconfig.Default():\n%+v", c, d)
	}
}

// A limit typed as 0 takes its default; a Config built in code with a 0
// limit is refused, naming the key.
func TestZeroLimit(t *testing.T) {
	c, err := load(t, []string{"--id", "1", "--max-conns", "0"}, map[string]string{"ELECTORD_IDLE_TIMEOUT": "0s"}, "max-message-bytes: 0\n")
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	if c.MaxConns != d.MaxConns || c.IdleTimeout != d.IdleTimeout || c.MaxMessageBytes != d.MaxMessageBytes {
		t.Fatalf("a typed 0 did not take the default: max-conns %d, idle-timeout %v, max-message-bytes %d", c.MaxConns, c.IdleTimeout, c.MaxMessageBytes)
	}
	d.ID, d.MaxConns = 1, 0
	if err := d.Validate(); err == nil || !strings.Contains(err.Error(), "max-conns: is 0") {
		t.Fatalf("Validate of a hand-built 0 max-conns = %v, want an error naming max-conns", err)
	}
}

// MaxHeartbeatWait restates the transport's bound, which config cannot
// import (the transport's tests take their values from config).
func TestMaxHeartbeatWaitIsTheTransports(t *testing.T) {
	if MaxHeartbeatWait != transport.MaxHeartbeatWait {
		t.Fatalf("config.MaxHeartbeatWait %v, transport.MaxHeartbeatWait %v", MaxHeartbeatWait, transport.MaxHeartbeatWait)
	}
	if DefaultPeerStreamTimeout <= MaxHeartbeatWait {
		t.Fatalf("DefaultPeerStreamTimeout %v is not above MaxHeartbeatWait %v", DefaultPeerStreamTimeout, MaxHeartbeatWait)
	}
}

// peer-workers 0 sizes the pool by the CPUs; gossip-label empty takes the
// cluster name.
func TestResolvedValues(t *testing.T) {
	c := Default()
	if got, want := c.PeerWorkerCount(), 2*runtime.GOMAXPROCS(0); got != want {
		t.Errorf("PeerWorkerCount at peer-workers 0 = %d, want %d", got, want)
	}
	c.PeerWorkers = 3
	if got := c.PeerWorkerCount(); got != 3 {
		t.Errorf("PeerWorkerCount at peer-workers 3 = %d", got)
	}
	if got := c.GossipLabelFor("prod"); got != "prod" {
		t.Errorf("GossipLabelFor with no gossip-label = %q, want the cluster", got)
	}
	c.GossipLabel = "blue"
	if got := c.GossipLabelFor("prod"); got != "blue" {
		t.Errorf("GossipLabelFor = %q, want gossip-label", got)
	}
}
