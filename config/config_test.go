package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func load(t *testing.T, args []string, env map[string]string, yaml string) (Config, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	fs := pflag.NewFlagSet("electord", pflag.ContinueOnError)
	Register(fs)
	if yaml != "" {
		p := filepath.Join(t.TempDir(), "electord.yaml")
		if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", p)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return Load(fs)
}

func TestPrecedenceFlagEnvFileDefault(t *testing.T) {
	yaml := "id: 3\npriority: 1\nalgorithm: ring\nheartbeat-interval: 40ms\njoin: [a:1, b:2]\n"
	// file only
	c, err := load(t, nil, nil, yaml)
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != 3 || c.Priority != 1 || c.Algorithm != "ring" || c.HeartbeatInterval.String() != "40ms" || len(c.Join) != 2 {
		t.Fatalf("file: %+v", c)
	}
	if c.HeartbeatTimeout != DefaultHeartbeatTimeout || c.HTTPAddr != "127.0.0.1:4040" || c.Name != "node-3" {
		t.Fatalf("defaults: %+v", c)
	}
	// env beats file
	c, err = load(t, nil, map[string]string{"ELECTORD_PRIORITY": "7", "ELECTORD_HEARTBEAT_INTERVAL": "30ms", "ELECTORD_JOIN": "x:1,y:2,z:3"}, yaml)
	if err != nil {
		t.Fatal(err)
	}
	if c.Priority != 7 || c.HeartbeatInterval.String() != "30ms" || len(c.Join) != 3 || c.Algorithm != "ring" {
		t.Fatalf("env over file: %+v", c)
	}
	// flag beats env
	c, err = load(t, []string{"--priority", "9", "--algorithm", "bully"}, map[string]string{"ELECTORD_PRIORITY": "7"}, yaml)
	if err != nil {
		t.Fatal(err)
	}
	if c.Priority != 9 || c.Algorithm != "bully" || c.ID != 3 {
		t.Fatalf("flag over env: %+v", c)
	}
}

func TestUnknownFileKeyIsNamed(t *testing.T) {
	_, err := load(t, nil, nil, "id: 1\nheartbeat-intervall: 10ms\n")
	if err == nil || !strings.Contains(err.Error(), "heartbeat-intervall") {
		t.Fatalf("want an error naming the unknown key, got %v", err)
	}
}

func TestBadValueTypeIsNamed(t *testing.T) {
	_, err := load(t, nil, nil, "id: 1\nheartbeat-interval: soon\n")
	if err == nil || !strings.Contains(err.Error(), "heartbeat-interval") {
		t.Fatalf("want an error naming heartbeat-interval, got %v", err)
	}
}

func TestValidateNamesTheKey(t *testing.T) {
	base := func() Config {
		c, err := load(t, []string{"--id", "1"}, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("defaults with an id must validate: %v", err)
	}
	if c := base(); c.MaxConns != DefaultMaxConns || c.MaxWatchers != DefaultMaxWatchers || c.PeerMaxStreams != DefaultPeerMaxStreams ||
		c.MaxStreams != DefaultMaxStreams || c.HandshakeTimeout != DefaultHandshakeTimeout || c.IdleTimeout != DefaultIdleTimeout ||
		c.PeerMaxBufferedBytes != DefaultPeerMaxBufferedBytes || c.MaxMessageBytes != 1<<20 || c.MaxHeaderListBytes != 16<<10 ||
		c.PeerStreamTimeout != 15*time.Second {
		t.Fatalf("limit defaults: %+v", c)
	}
	cases := []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.ID = 0 }, "id: must be set"},
		{func(c *Config) { c.Algorithm = "raft" }, `algorithm: must be one of bully, ring, got "raft"`},
		{func(c *Config) { c.HeartbeatTimeout = c.HeartbeatInterval }, "heartbeat-timeout: must exceed heartbeat-interval"},
		{func(c *Config) { c.PeerAddr = "nohost" }, "peer-addr:"},
		{func(c *Config) { c.APIAddr = c.PeerAddr }, "api-addr: 127.0.0.1:7071 is already used by peer-addr"},
		{func(c *Config) { c.Quorum = -2 }, "quorum:"},
		{func(c *Config) { c.BootstrapExpect = -1 }, "bootstrap-expect:"},
		{func(c *Config) { c.K8sLeaderElection = "jobs" }, "k8s-leader-election: needs k8s-leader-service"},
		{func(c *Config) { c.K8sLeaderService, c.K8sLeaderElection = "svc", "a/b" }, "k8s-leader-election: "},
		{func(c *Config) { c.GossipPreset = "wan" }, "gossip-preset:"},
		{func(c *Config) { c.MaxProcs = -1 }, "max-procs: must be between 0 (Go's default) and 1024, got -1"},
		{func(c *Config) { c.Join = []string{"http://x"} }, "join:"},
		{func(c *Config) { c.Quorum, c.HeartbeatTimeout = 3, 2*c.HeartbeatInterval }, "heartbeat-timeout: must be at least 3x"},
		{func(c *Config) { c.MaxConns = -1 }, "max-conns: must not be negative"},
		{func(c *Config) { c.MaxWatchers = -1 }, "max-watchers: must not be negative"},
		{func(c *Config) { c.PeerMaxStreams = -1 }, "peer-max-streams: must not be negative"},
		{func(c *Config) { c.IdleTimeout = -1 }, "idle-timeout: must not be negative"},
		{func(c *Config) { c.PeerMaxBufferedBytes = -1 }, "peer-max-buffered-bytes: must not be negative"},
		{func(c *Config) { c.MaxMessageBytes = -1 }, "max-message-bytes: must not be negative"},
		{func(c *Config) { c.MaxMessageBytes = 4095 }, "max-message-bytes: must be 0 (the default) or from 4096"},
		{func(c *Config) { c.MaxMessageBytes = 64<<20 + 1 }, "max-message-bytes: must be 0 (the default) or from 4096 (election messages and API requests with room) to 67108864"},
		{func(c *Config) { c.MaxMessageBytes = 33 << 20 }, "peer-max-buffered-bytes: must be at least max-message-bytes (34603008"},
		{func(c *Config) { c.MaxHeaderListBytes = -1 }, "max-header-list-bytes: must not be negative"},
		{func(c *Config) { c.MaxHeaderListBytes = 1023 }, "max-header-list-bytes: must be 0 (the default) or from 1024"},
		{func(c *Config) { c.MaxHeaderListBytes = 1<<20 + 1 }, "max-header-list-bytes: must be 0 (the default) or from 1024 (gRPC's own headers) to 1048576"},
		{func(c *Config) { c.PeerStreamTimeout = -1 }, "peer-stream-timeout: must not be negative"},
		{func(c *Config) { c.PeerStreamTimeout = 10 * time.Second }, "peer-stream-timeout: must be 0 (the default) or above 10s, the longest a Heartbeat handler waits"},
		{func(c *Config) { c.PeerMaxBufferedBytes = MinPeerMaxBufferedBytes - 1 }, "peer-max-buffered-bytes: must be 0 (the default) or at least 1048576"},
	}
	for _, tc := range cases {
		c := base()
		tc.mut(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want %q, got %v", tc.want, err)
		}
	}
}

func TestIDFromHostname(t *testing.T) {
	for host, want := range map[string]uint64{"electord-0": 1, "my-app-12": 13} {
		if got, err := IDFromHostname(host); err != nil || got != want {
			t.Errorf("IDFromHostname(%q) = %d, %v; want %d", host, got, err, want)
		}
	}
	for _, host := range []string{"electord", "node-x", ""} {
		if _, err := IDFromHostname(host); err == nil || !strings.Contains(err.Error(), "id-from-hostname") {
			t.Errorf("IDFromHostname(%q) = %v, want an error naming id-from-hostname", host, err)
		}
	}
}

// Every id up to MaxID has a term slot of its own; a larger one would share
// a slot with a smaller id and, cut off from it, mint the same terms.
func TestIDsHaveASlotOfTheirOwn(t *testing.T) {
	for _, tc := range []struct {
		id uint64
		ok bool
	}{{1, true}, {MaxID, true}, {MaxID + 1, false}, {65539, false}, {1 << 40, false}} {
		c, err := load(t, []string{"--id", "1"}, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		c.ID = tc.id
		err = c.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("id %d: Validate() = %v, want ok=%v", tc.id, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "id: must be at most 65535") {
			t.Errorf("id %d: error %q does not name the key and the limit", tc.id, err)
		}
	}
}
