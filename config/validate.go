package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/algorithms"
	"github.com/electord/electord/election/named"
	"github.com/electord/electord/membership"
)

// Validate checks every field and the fields against each other.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, a...)))
	}
	if c.ID == 0 {
		bad("id", "must be set to a non-zero node id")
	}
	if c.ID > MaxID {
		bad("id", "must be at most %d, got %d: a term names its leader by the id's low %d bits (its term slot), so a larger "+
			"id would share a slot with another node's and, cut off from it, mint the same terms", MaxID, c.ID, election.SlotBits)
	}
	limits := c.limits()
	for _, key := range limitKeys {
		switch v := limits[key].Int(); {
		case v < 0:
			bad(key, "must not be negative (0 takes the default)")
		case v == 0:
			// Load turns a typed 0 into the default; a Config built in code
			// with a 0 here did not start from Default.
			bad(key, "is 0: build the configuration from config.Default() (a 0 typed in a file, the environment or a flag takes the default)")
		}
	}
	if c.PeerMaxBufferedBytes > 0 && c.PeerMaxBufferedBytes < MinPeerMaxBufferedBytes {
		bad("peer-max-buffered-bytes", "must be 0 (the default) or at least %d (one peer message), got %d", MinPeerMaxBufferedBytes, c.PeerMaxBufferedBytes)
	}
	if c.MaxMessageBytes > 0 && (c.MaxMessageBytes < MinMaxMessageBytes || c.MaxMessageBytes > MaxMaxMessageBytes) {
		bad("max-message-bytes", "must be 0 (the default) or from %d (election messages and API requests with room) to %d "+
			"(a grpc peer stream's window is one message, and peer-max-buffered-bytes is counted in windows), got %d",
			MinMaxMessageBytes, MaxMaxMessageBytes, c.MaxMessageBytes)
	}
	if msg, buf := int64(c.MaxMessageBytes), c.PeerMaxBufferedBytes; msg > 0 && buf > 0 && c.MaxMessageBytes <= MaxMaxMessageBytes && buf < msg {
		bad("peer-max-buffered-bytes", "must be at least max-message-bytes (%d: one whole message), got %d", msg, buf)
	}
	if c.MaxHeaderListBytes > 0 && (c.MaxHeaderListBytes < MinMaxHeaderListBytes || c.MaxHeaderListBytes > MaxMaxHeaderListBytes) {
		bad("max-header-list-bytes", "must be 0 (the default) or from %d (gRPC's own headers) to %d, got %d",
			MinMaxHeaderListBytes, MaxMaxHeaderListBytes, c.MaxHeaderListBytes)
	}
	if c.PeerStreamTimeout > 0 && c.PeerStreamTimeout <= MaxHeartbeatWait {
		bad("peer-stream-timeout", "must be 0 (the default) or above %v, the longest a Heartbeat handler waits for the node "+
			"(transport.MaxHeartbeatWait): a shorter one would end heartbeats that are being answered, got %v",
			MaxHeartbeatWait, c.PeerStreamTimeout)
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
		bad("heartbeat-timeout", "must be at least 3x heartbeat-interval in quorum mode, so the lease (three quarters of the timeout) outlasts a missed heartbeat")
	}
	if c.K8sLeaderElection != "" {
		switch err := named.CheckName(c.K8sLeaderElection); {
		case err != nil:
			bad("k8s-leader-election", "%v", err)
		case c.K8sLeaderService == "":
			bad("k8s-leader-election", "needs k8s-leader-service (the Service that follows the election)")
		}
	}
	if _, err := membership.PresetNamed(c.GossipPreset); err != nil {
		bad("gossip-preset", "%v", err)
	}
	if c.PeerServer != "grpc" && c.PeerServer != "lf" {
		bad("peer-server", "must be grpc or lf, got %q", c.PeerServer)
	}
	if c.MaxProcs < 0 || c.MaxProcs > 1024 {
		bad("max-procs", "must be between 0 (Go's default) and 1024, got %d", c.MaxProcs)
	}
	if c.PeerWorkers < 0 || c.PeerWorkers > 4096 {
		bad("peer-workers", "must be between 0 and 4096, got %d", c.PeerWorkers)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log-level", "must be debug, info, warn or error, got %q", c.LogLevel)
	}
	switch c.LogFormat {
	case "", "text", "json":
	default:
		bad("log-format", "must be text or json, got %q", c.LogFormat)
	}
	if c.HealthAddr != "" {
		if err := checkHostPort(c.HealthAddr); err != nil {
			bad("health-addr", "%v", err)
		}
	}
	c.validateCandidateProbe(bad)
	c.validateSpread(bad)
	if c.TLS() {
		for _, f := range []struct{ key, val string }{{"tls-cert", c.TLSCert}, {"tls-key", c.TLSKey}, {"tls-ca", c.TLSCA}} {
			if f.val == "" {
				bad(f.key, "must be set with the other TLS keys (tls-cert, tls-key and tls-ca go together)")
			}
		}
	}
	if c.HTTPTLS && !c.TLS() {
		bad("http-tls", "needs tls-cert, tls-key and tls-ca")
	}
	if exposed := c.Exposed(); len(exposed) > 0 && !c.Insecure {
		var missing []string
		for _, f := range []struct{ key, val string }{{"tls-cert", c.TLSCert}, {"tls-key", c.TLSKey}, {"tls-ca", c.TLSCA}, {"gossip-key-file", c.GossipKeyFile}} {
			if f.val == "" {
				missing = append(missing, f.key)
			}
		}
		if len(missing) > 0 {
			bad(strings.Join(missing, ", "), "required, since not loopback: %s (anyone who reaches it could control the cluster); "+
				"create the files with electord certs (docs/SECURITY.md), or start with --insecure", strings.Join(exposed, ", "))
		}
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
