// Package config loads electord's configuration with spf13/viper from a
// YAML file (--config), ELECTORD_* environment variables and flags, with the
// precedence flag > env > file > default, and validates it. Every error
// names the key the user typed.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/electord/electord/election/algorithms"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// Config is one electord node's configuration. The mapstructure tags are
// the keys users type: flag names, YAML keys, and ELECTORD_<KEY> with
// dashes as underscores.
type Config struct {
	ID                uint64        `mapstructure:"id"`
	IDFromHostname    bool          `mapstructure:"id-from-hostname"`
	Name              string        `mapstructure:"name"`
	Priority          int64         `mapstructure:"priority"`
	Algorithm         string        `mapstructure:"algorithm"`
	PeerAddr          string        `mapstructure:"peer-addr"`
	GossipAddr        string        `mapstructure:"gossip-addr"`
	APIAddr           string        `mapstructure:"api-addr"`
	HTTPAddr          string        `mapstructure:"http-addr"`
	AdvertiseHost     string        `mapstructure:"advertise-host"`
	Join              []string      `mapstructure:"join"`
	DataDir           string        `mapstructure:"data-dir"`
	HeartbeatInterval time.Duration `mapstructure:"heartbeat-interval"`
	HeartbeatTimeout  time.Duration `mapstructure:"heartbeat-timeout"`
	Quorum            int           `mapstructure:"quorum"`
	BootstrapExpect   int           `mapstructure:"bootstrap-expect"`
	Preempt           bool          `mapstructure:"preempt"`
	GossipPreset      string        `mapstructure:"gossip-preset"`
	PeerServer        string        `mapstructure:"peer-server"`
	PeerWorkers       int           `mapstructure:"peer-workers"`
	Tick              time.Duration `mapstructure:"tick"`
	LogLevel          string        `mapstructure:"log-level"`
}

// Defaults, each with the reason for its value.
const (
	// DefaultHeartbeatInterval: followers check the leader 20 times a second;
	// on loopback a heartbeat costs about 100µs of CPU per pair.
	DefaultHeartbeatInterval = 50 * time.Millisecond
	// DefaultHeartbeatTimeout: five missed heartbeats before suspecting the
	// leader. With the jitter (a quarter of it) and the election, a crash
	// fails over in about 0.3 s, under the 500 ms target, while a CPU-starved
	// node still has 250 ms of slack before it raises a false alarm.
	DefaultHeartbeatTimeout = 250 * time.Millisecond
	// DefaultPeerServer is the inbound peer server; see docs/BENCHMARKS.md
	// ("Peer servers") for the measurements behind the choice.
	DefaultPeerServer = "lf"
	// DefaultTick is the instance loop's clock; timeouts are rounded up to it.
	DefaultTick = 10 * time.Millisecond
)

// Register defines every flag, with its default, on fs.
func Register(fs *pflag.FlagSet) {
	fs.String("config", "", "YAML config file (keys are the flag names)")
	fs.Uint64("id", 0, "node id: unique, non-zero; ids must also differ in their low 16 bits")
	fs.Bool("id-from-hostname", false, "take the id from a StatefulSet hostname: <name>-<ordinal> gives id ordinal+1")
	fs.String("name", "", "node name shown to users (default node-<id>)")
	fs.Int64("priority", 0, "election priority: the higher wins; ties go to the higher id")
	fs.String("algorithm", algorithms.Default, "election algorithm: "+strings.Join(algorithms.Names(), " or "))
	fs.String("peer-addr", "127.0.0.1:7071", "host:port for peer gRPC (election messages)")
	fs.String("gossip-addr", "127.0.0.1:7946", "host:port for gossip (UDP and TCP)")
	fs.String("api-addr", "127.0.0.1:7070", "host:port for the client gRPC API (electctl, client library)")
	fs.String("http-addr", "127.0.0.1:4040", "host:port for the sidecar HTTP endpoint (localhost by default)")
	fs.String("advertise-host", "", "host peers should dial when the bind host is 0.0.0.0 (default: the bind host)")
	fs.StringSlice("join", nil, "gossip seeds: host:port or DNS names (a Kubernetes headless Service), comma-separated")
	fs.String("data-dir", "", "directory where the term is persisted (empty: memory only)")
	fs.Duration("heartbeat-interval", DefaultHeartbeatInterval, "how often followers heartbeat the leader")
	fs.Duration("heartbeat-timeout", DefaultHeartbeatTimeout, "how long without an answer before a follower suspects the leader")
	fs.Int("quorum", 0, "cluster size for quorum mode (0 = off): only a majority side may have a leader")
	fs.Int("bootstrap-expect", 0, "on a first start (no term in data-dir), wait to see this many members, itself included, before starting an election (0 = do not wait)")
	fs.Bool("preempt", false, "let a higher-ranked node depose a healthy leader")
	fs.String("gossip-preset", "lan", "gossip timings: lan or local")
	fs.String("peer-server", DefaultPeerServer, "inbound peer server: lf (the Leader/Followers epoll pool, Linux) or grpc (stock grpc-go)")
	fs.Int("peer-workers", 0, "goroutines in the lf pool (0 = 2×GOMAXPROCS)")
	fs.Duration("tick", DefaultTick, "the instance loop's clock period")
	fs.String("log-level", "info", "debug, info, warn or error")
}

// Load reads the configuration for a command whose flags Register defined
// and that were parsed already.
func Load(fs *pflag.FlagSet) (Config, error) {
	v := viper.New()
	v.SetEnvPrefix("ELECTORD")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	known := map[string]bool{}
	var bindErr error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == "config" || f.Name == "help" {
			return
		}
		known[f.Name] = true
		if err := v.BindPFlag(f.Name, f); err != nil {
			bindErr = errors.Join(bindErr, err)
		}
	})
	if bindErr != nil {
		return Config{}, bindErr
	}
	if path, _ := fs.GetString("config"); path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return Config{}, fmt.Errorf("config: reading %s: %w", path, err)
		}
		var unknown []string
		for _, k := range v.AllKeys() {
			if !known[k] && v.InConfig(k) {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			slices.Sort(unknown)
			return Config{}, fmt.Errorf("config: %s: unknown key(s) %s (keys are the flag names, e.g. heartbeat-interval)",
				path, strings.Join(unknown, ", "))
		}
	}
	var c Config
	if err := v.Unmarshal(&c); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	// A comma-separated ELECTORD_JOIN arrives as one string.
	if len(c.Join) == 1 && strings.Contains(c.Join[0], ",") {
		c.Join = strings.Split(c.Join[0], ",")
	}
	for i := range c.Join {
		c.Join[i] = strings.TrimSpace(c.Join[i])
	}
	c.Join = slices.DeleteFunc(c.Join, func(s string) bool { return s == "" })
	if c.ID == 0 && c.IDFromHostname {
		host, err := os.Hostname()
		if err != nil {
			return Config{}, fmt.Errorf("id-from-hostname: %w", err)
		}
		if c.ID, err = IDFromHostname(host); err != nil {
			return Config{}, err
		}
		if c.Name == "" {
			c.Name = host
		}
	}
	if c.Name == "" && c.ID != 0 {
		c.Name = "node-" + strconv.FormatUint(c.ID, 10)
	}
	return c, nil
}

// Validate checks every field and the fields against each other.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, a...)))
	}
	if c.ID == 0 {
		bad("id", "must be set to a non-zero node id")
	}
	if err := algorithms.Check(c.Algorithm); err != nil {
		bad("algorithm", "%v", err)
	}
	addrs := map[string]string{}
	for _, a := range []struct{ key, val string }{{"peer-addr", c.PeerAddr}, {"gossip-addr", c.GossipAddr}, {"api-addr", c.APIAddr}, {"http-addr", c.HTTPAddr}} {
		if err := checkHostPort(a.val); err != nil {
			bad(a.key, "%v", err)
			continue
		}
		if other, dup := addrs[a.val]; dup && !strings.HasSuffix(a.val, ":0") {
			bad(a.key, "%s is already used by %s", a.val, other)
		}
		addrs[a.val] = a.key
	}
	for _, j := range c.Join {
		if strings.ContainsAny(j, " /") {
			bad("join", "%q is not host:port or a DNS name", j)
		}
	}
	if c.HeartbeatInterval <= 0 {
		bad("heartbeat-interval", "must be positive, got %v", c.HeartbeatInterval)
	}
	if c.HeartbeatTimeout <= c.HeartbeatInterval {
		bad("heartbeat-timeout", "must exceed heartbeat-interval (%v <= %v)", c.HeartbeatTimeout, c.HeartbeatInterval)
	}
	if c.Tick <= 0 || c.Tick > c.HeartbeatInterval {
		bad("tick", "must be positive and at most heartbeat-interval (%v), got %v", c.HeartbeatInterval, c.Tick)
	}
	if c.Quorum < 0 {
		bad("quorum", "must be 0 (off) or the cluster size, got %d", c.Quorum)
	}
	if c.BootstrapExpect < 0 {
		bad("bootstrap-expect", "must be 0 (off) or the number of nodes the cluster starts with, got %d", c.BootstrapExpect)
	}
	if c.Quorum > 0 && c.HeartbeatTimeout < 3*c.HeartbeatInterval {
		bad("heartbeat-timeout", "must be at least 3x heartbeat-interval in quorum mode, so the lease (timeout - interval) outlasts a missed heartbeat")
	}
	if c.GossipPreset != "lan" && c.GossipPreset != "local" {
		bad("gossip-preset", "must be lan or local, got %q", c.GossipPreset)
	}
	if c.PeerServer != "grpc" && c.PeerServer != "lf" {
		bad("peer-server", "must be grpc or lf, got %q", c.PeerServer)
	}
	if c.PeerWorkers < 0 || c.PeerWorkers > 4096 {
		bad("peer-workers", "must be between 0 and 4096, got %d", c.PeerWorkers)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log-level", "must be debug, info, warn or error, got %q", c.LogLevel)
	}
	if c.DataDir != "" {
		if fi, err := os.Stat(c.DataDir); err == nil && !fi.IsDir() {
			bad("data-dir", "%s is not a directory", c.DataDir)
		}
	}
	return errors.Join(errs...)
}

// IDFromHostname maps a StatefulSet pod name, <name>-<ordinal>, to the node
// id ordinal+1.
func IDFromHostname(host string) (uint64, error) {
	i := strings.LastIndexByte(host, '-')
	ord, err := strconv.ParseUint(host[i+1:], 10, 32)
	if i < 0 || err != nil {
		return 0, fmt.Errorf("id-from-hostname: hostname %q does not end in -<ordinal> (a StatefulSet pod name)", host)
	}
	return ord + 1, nil
}

func checkHostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %v", s, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%q has a bad port %q", s, port)
	}
	return nil
}
