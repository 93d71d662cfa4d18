// Package config is the one home of electord's defaults and of their
// validation. Default returns a node's configuration with every default
// (defaults.go says why each value); Load reads it with spf13/viper from a
// YAML file (--config), ELECTORD_* environment variables and flags, with
// the precedence flag > env > file > default; Validate checks every key and
// the keys against each other (validate.go), each error naming the key the
// user typed. The components (api, transport, lf, the engine, membership,
// node) take the values built here and default none of them: a test in
// this package fails when one does.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/electord/electord/election"
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
	MaxProcs          int           `mapstructure:"max-procs"`
	Tick              time.Duration `mapstructure:"tick"`
	LogLevel          string        `mapstructure:"log-level"`
	LogFormat         string        `mapstructure:"log-format"`
	// HealthAddr serves /healthz, /readyz, /livez, Prometheus /metrics and
	// the status page; empty: off.
	HealthAddr string `mapstructure:"health-addr"`

	// Candidate probe (docs/ELECTIONS.md, "Candidate probe"): the node
	// stands in the default election only while the app's health endpoint
	// passes; empty CandidateProbe: off (the node always stands).
	CandidateProbe          string        `mapstructure:"candidate-probe"`
	CandidateProbePeriod    time.Duration `mapstructure:"candidate-probe-period"`
	CandidateProbeTimeout   time.Duration `mapstructure:"candidate-probe-timeout"`
	CandidateProbeFailures  int           `mapstructure:"candidate-probe-failures"`
	CandidateProbeSuccesses int           `mapstructure:"candidate-probe-successes"`

	// Placement spread's rebalancing (docs/ELECTIONS.md, "Placement").
	SpreadImbalance         float64       `mapstructure:"spread-imbalance"`
	SpreadRebalanceInterval time.Duration `mapstructure:"spread-rebalance-interval"`
	SpreadRebalanceBatch    int           `mapstructure:"spread-rebalance-batch"`

	// Kubernetes leader-only routing (package k8s/leaderslice): on when
	// K8sLeaderService is set.
	K8sLeaderService string `mapstructure:"k8s-leader-service"`
	// K8sLeaderElection: the election whose leader the Service follows,
	// the pod whose app leads it ("": the default election, the node's
	// own).
	K8sLeaderElection string `mapstructure:"k8s-leader-election"`
	K8sNamespace      string `mapstructure:"k8s-namespace"`
	K8sPodName        string `mapstructure:"k8s-pod-name"`
	K8sPodIP          string `mapstructure:"k8s-pod-ip"`
	Kubeconfig        string `mapstructure:"kubeconfig"`

	// Limits: each bounds what clients or peers can make a node hold. A 0
	// typed in a file, the environment or a flag takes the default (Load);
	// a Config built in code starts from Default.
	MaxConns         int           `mapstructure:"max-conns"`
	MaxStreams       int           `mapstructure:"max-streams"`
	PeerMaxStreams   int           `mapstructure:"peer-max-streams"`
	MaxWatchers      int           `mapstructure:"max-watchers"`
	HandshakeTimeout time.Duration `mapstructure:"handshake-timeout"`
	IdleTimeout      time.Duration `mapstructure:"idle-timeout"`
	// PeerMaxBufferedBytes bounds what the peer server buffers for all
	// its connections together (see DefaultPeerMaxBufferedBytes).
	PeerMaxBufferedBytes int64 `mapstructure:"peer-max-buffered-bytes"`
	// MaxMessageBytes bounds a peer message (sent and received) and an API
	// request; MaxHeaderListBytes a request's header list on every server
	// (lf, grpc peer, API, sidecar HTTP); PeerStreamTimeout how long a
	// stream of the grpc peer server may take to deliver its request.
	MaxMessageBytes    int           `mapstructure:"max-message-bytes"`
	MaxHeaderListBytes int           `mapstructure:"max-header-list-bytes"`
	PeerStreamTimeout  time.Duration `mapstructure:"peer-stream-timeout"`

	// Security; see docs/SECURITY.md.
	Cluster       string `mapstructure:"cluster"`
	TLSCert       string `mapstructure:"tls-cert"`
	TLSKey        string `mapstructure:"tls-key"`
	TLSCA         string `mapstructure:"tls-ca"`
	HTTPTLS       bool   `mapstructure:"http-tls"`
	GossipKeyFile string `mapstructure:"gossip-key-file"`
	GossipLabel   string `mapstructure:"gossip-label"`
	Insecure      bool   `mapstructure:"insecure"`
}

// TLS reports whether TLS material is configured.
func (c Config) TLS() bool { return c.TLSCert != "" || c.TLSKey != "" || c.TLSCA != "" }

// GossipLabelFor is the label on this node's gossip: gossip-label, or, when
// it is empty, cluster, the cluster name (the cluster key's, or the one in
// tls-cert, which only the loaded certificate tells), so that two clusters
// on one network never merge.
func (c Config) GossipLabelFor(cluster string) string {
	if c.GossipLabel != "" {
		return c.GossipLabel
	}
	return cluster
}

// Exposed lists the keys of the peer, gossip and api addresses that are
// not loopback: a node with one needs TLS and a gossip key, or insecure.
func (c Config) Exposed() []string {
	var out []string
	for _, a := range []struct{ key, val string }{{"peer-addr", c.PeerAddr}, {"gossip-addr", c.GossipAddr}, {"api-addr", c.APIAddr}} {
		if !loopback(a.val) {
			out = append(out, a.key+" "+a.val)
		}
	}
	return out
}

// loopback reports whether a host:port binds loopback only.
func loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// MaxID is the largest node id: a term is epoch<<election.SlotBits | slot,
// the slot being the low bits of the leader's id, so every id up to MaxID
// has a slot of its own and no two nodes of a valid configuration can mint
// the same term, even on two sides of a partition. (Gossip still settles
// a slot claimed by a forged or foreign member: membership/claims.go.)
const MaxID = 1<<election.SlotBits - 1

// Register defines every flag, with its default from Default, on fs.
func Register(fs *pflag.FlagSet) {
	d := Default()
	fs.String("config", "", "YAML config file (keys are the flag names)")
	fs.Uint64("id", 0, "node id: unique, 1 to 65535 (a term names its leader by the id)")
	fs.Bool("id-from-hostname", false, "take the id from a StatefulSet hostname: <name>-<ordinal> gives id ordinal+1")
	fs.String("name", "", "node name shown to users (default node-<id>)")
	fs.Int64("priority", 0, "election priority: the higher wins; ties go to the higher id")
	fs.String("algorithm", d.Algorithm, "election algorithm: "+strings.Join(algorithms.Names(), " or "))
	fs.String("peer-addr", d.PeerAddr, "host:port for peer gRPC (election messages)")
	fs.String("gossip-addr", d.GossipAddr, "host:port for gossip (UDP and TCP)")
	fs.String("api-addr", d.APIAddr, "host:port for the client gRPC API (electctl, client library)")
	fs.String("http-addr", d.HTTPAddr, "host:port for the sidecar HTTP endpoint (localhost by default)")
	fs.String("advertise-host", "", "host peers should dial when the bind host is 0.0.0.0 (default: the bind host)")
	fs.StringSlice("join", nil, "gossip seeds: host:port or DNS names (a Kubernetes headless Service), comma-separated")
	fs.String("data-dir", "", "directory where the term is persisted (empty: memory only)")
	fs.Duration("heartbeat-interval", d.HeartbeatInterval, "how often followers heartbeat the leader")
	fs.Duration("heartbeat-timeout", d.HeartbeatTimeout, "how long without an answer before a follower suspects the leader")
	fs.Int("quorum", 0, "cluster size for quorum mode (0 = off): only a majority side may have a leader")
	fs.Int("bootstrap-expect", 0, "on a first start (no term in data-dir), wait to see this many members, itself included, before starting an election (0 = do not wait)")
	fs.Bool("preempt", false, "let a higher-ranked node depose a healthy leader")
	fs.String("gossip-preset", d.GossipPreset, "gossip timings: lan or local")
	fs.String("peer-server", d.PeerServer, "inbound peer server: lf (the Leader/Followers epoll pool, Linux) or grpc (stock grpc-go)")
	fs.Int("peer-workers", d.PeerWorkers, "goroutines in the lf pool (0 = 2×GOMAXPROCS)")
	fs.Int("max-procs", d.MaxProcs, "CPUs the node's goroutines run on at once (GOMAXPROCS; 0 = Go's default: the CPUs, or the container's limit); the GOMAXPROCS environment variable, when set, wins")
	fs.Duration("tick", d.Tick, "the instance loop's clock period")
	fs.String("log-level", d.LogLevel, "debug, info, warn or error")
	fs.String("log-format", d.LogFormat, "log format: text or json")
	fs.String("health-addr", "", "host:port for /healthz, /readyz, /livez, Prometheus /metrics and the status page (empty: off)")
	fs.String("candidate-probe", "", "http(s) URL of the app's health endpoint: the node stands in the default election only while it answers 2xx or 3xx (empty: off)")
	fs.Duration("candidate-probe-period", d.CandidateProbePeriod, "how often the candidate probe runs")
	fs.Duration("candidate-probe-timeout", d.CandidateProbeTimeout, "how long a candidate probe may take before it counts as failed (at most candidate-probe-period)")
	fs.Int("candidate-probe-failures", d.CandidateProbeFailures, "failed probes in a row before the node stops standing (a refused connection counts at once)")
	fs.Int("candidate-probe-successes", d.CandidateProbeSuccesses, "passed probes in a row before the node stands again")
	fs.Float64("spread-imbalance", d.SpreadImbalance, "placement spread: leaderships move while the most a live candidate node leads exceeds the least by more than this fraction")
	fs.Duration("spread-rebalance-interval", d.SpreadRebalanceInterval, "placement spread: how often a node may hand leaderships over to rebalance")
	fs.Int("spread-rebalance-batch", d.SpreadRebalanceBatch, "placement spread: the most leaderships a node hands over per spread-rebalance-interval")
	fs.String("k8s-leader-service", "", "Kubernetes: the selector-less Service whose EndpointSlice the leader writes with its own pod address (empty: off)")
	fs.String("k8s-leader-election", d.K8sLeaderElection, "Kubernetes: the named election k8s-leader-service follows: its EndpointSlice names the pod whose app leads it (empty: the default election, the node's own leadership)")
	fs.String("k8s-namespace", "", "Kubernetes: the namespace of k8s-leader-service (default: the pod's, from the service account)")
	fs.String("k8s-pod-name", "", "Kubernetes: this pod's name (default: the hostname)")
	fs.String("k8s-pod-ip", "", "Kubernetes: this pod's IP, written to the EndpointSlice (default: advertise-host)")
	fs.String("kubeconfig", "", "Kubernetes: a kubeconfig file (default: the in-cluster service account)")
	fs.Int("max-conns", d.MaxConns, "open connections per listener (peer, api, http); more wait to be accepted")
	fs.Int("max-streams", d.MaxStreams, "concurrent streams per API connection")
	fs.Int("peer-max-streams", d.PeerMaxStreams, "concurrent streams per peer connection")
	fs.Int64("peer-max-buffered-bytes", d.PeerMaxBufferedBytes, "request bytes the peer server buffers for all connections together (grpc: streams in flight = this / 1 MiB); a call beyond it gets ResourceExhausted")
	fs.Int("max-message-bytes", d.MaxMessageBytes, "largest peer message (sent and received) and API request; peers must agree on it: a larger message is refused with ResourceExhausted")
	fs.Int("max-header-list-bytes", d.MaxHeaderListBytes, "largest request header list on the peer, API and sidecar HTTP servers")
	fs.Duration("peer-stream-timeout", d.PeerStreamTimeout, "grpc peer server: how long a stream may take to deliver its request and be answered (above the heartbeat handler's 10s wait)")
	fs.Int("max-watchers", d.MaxWatchers, "open watches (/watch and WatchLeader together); one more is refused (503, ResourceExhausted)")
	fs.Duration("handshake-timeout", d.HandshakeTimeout, "close a peer or API connection that has not finished its HTTP/2 handshake (a sidecar connection with http-tls: its TLS handshake) in time")
	fs.Duration("idle-timeout", d.IdleTimeout, "close a peer or API connection with no stream for this long")
	fs.String("cluster", "", "cluster name: every certificate's spiffe://<cluster>/... identity must name it, and the default gossip-label (default: the cluster of tls-cert)")
	fs.String("tls-cert", "", "this node's certificate (PEM, spiffe://<cluster>/node/<id>; electord certs node); reloaded when it changes")
	fs.String("tls-key", "", "the key of tls-cert (PEM); reloaded when it changes")
	fs.String("tls-ca", "", "the cluster CA certificate(s) (PEM) that sign nodes and clients; reloaded when it changes")
	fs.Bool("http-tls", false, "serve the sidecar HTTP endpoint over TLS with tls-cert (no client certificate asked)")
	fs.String("gossip-key-file", "", "gossip encryption keys, one base64 key (16, 24 or 32 bytes) a line, the first in use; reloaded when it changes")
	fs.String("gossip-label", "", "label on every gossip packet: nodes with another label are ignored (default: the cluster name)")
	fs.Bool("insecure", false, "allow non-loopback peer, gossip and api addresses without TLS and a gossip key (anyone who reaches them controls the cluster)")
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
	c.zeroLimitsTakeDefault()
	return c, nil
}

// limitKeys are the keys where a 0 the user typed takes the default.
var limitKeys = []string{"max-conns", "max-streams", "peer-max-streams", "max-watchers", "handshake-timeout", "idle-timeout",
	"peer-max-buffered-bytes", "max-message-bytes", "max-header-list-bytes", "peer-stream-timeout"}

// limits returns the key and the field of every limit key of c.
func (c *Config) limits() map[string]reflect.Value {
	v := reflect.ValueOf(c).Elem()
	out := map[string]reflect.Value{}
	for i := range v.NumField() {
		if key := v.Type().Field(i).Tag.Get("mapstructure"); slices.Contains(limitKeys, key) {
			out[key] = v.Field(i)
		}
	}
	return out
}

// zeroLimitsTakeDefault sets every limit key that is 0 to Default's value,
// as the flags' help and Validate's errors promise.
func (c *Config) zeroLimitsTakeDefault() {
	d := Default()
	defaults := d.limits()
	for key, field := range c.limits() {
		if field.IsZero() {
			field.Set(defaults[key])
		}
	}
}
