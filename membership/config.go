package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/electord/electord/election"
)

// DefaultGossipPort is the port tried for a Join seed given without one.
const DefaultGossipPort = 7946

// Config configures one node's gossip.
type Config struct {
	// Self is what this node tells the others. Self.ID must be non-zero; it
	// becomes the node's gossip name, so a second node with the same id
	// collides inside memberlist.
	Self Meta
	// BindAddr is "host:port" for gossip, UDP and TCP on the same port
	// (config key gossip-addr). The host must be an IP address; empty means
	// every interface. Port 0 picks a free port: read it back with LocalAddr.
	BindAddr string
	// AdvertiseAddr is what the others use to reach this node (config key
	// advertise-host): "host" or "host:port", the host an IP address or a DNS
	// name resolved once by New; the port defaults to the bound one. Empty:
	// the bind IP, or a private IP of this machine when bound to every
	// interface.
	AdvertiseAddr string
	// Join lists the seeds Join contacts when given no seeds (config key
	// join): "host:port" or a DNS name, which may have no port (then
	// DefaultGossipPort). A name is resolved to every address it has (a
	// Kubernetes headless Service has one per pod) and every one is tried.
	Join []string
	// Preset names the timings (config key gossip-preset): "lan" or
	// "local"; see Presets. Required: New refuses a name that is no preset.
	Preset string
	// Logger receives this package's and memberlist's logs; nil discards.
	Logger *slog.Logger
	// KeyFile, if set, encrypts gossip with the keys it holds (config key
	// gossip-key-file; see ReadKeyFile) and is re-read when it changes, so
	// keys rotate without a restart. A node then refuses unencrypted
	// gossip. Empty: gossip is plain.
	KeyFile string
	// KeyPoll is how often KeyFile is checked (0: DefaultKeyPoll).
	KeyPoll time.Duration
	// Label is put on every gossip packet and stream (config key
	// gossip-label, default the cluster name): a node drops gossip with
	// another label, so two clusters on one network never merge.
	Label string
	// Settings are the cluster-wide settings; a node whose settings differ
	// is refused (see Settings).
	Settings Settings
	// BootstrapExpect is the number of members the cluster starts with
	// (config key bootstrap-expect; 0: off). Until this node has seen that
	// many live members (itself included) once, RetryJoin syncs state with
	// the seeds again and again (see ShortSyncFirst), instead of waiting
	// for memberlist's periodic push/pull to bring the members whose join
	// broadcasts it missed.
	BootstrapExpect int
	// Prove, if set, checks that the node at peerAddr holds a certificate
	// for node id (daemon: peerauth.Prover over the peer port's mutual TLS).
	// A node is then a member only once it proved its id, and conflicts over
	// an id or a term slot are settled among proven members (see the package
	// comment and proofs.go). It is called off memberlist's goroutines, at
	// most maxProofs at once, and must return within a few seconds (its ctx
	// ends after 5 s).
	Prove func(ctx context.Context, id election.NodeID, peerAddr string) error

	// wrapTransport, if set, wraps memberlist's network transport (tests cut
	// links with it).
	wrapTransport func(memberlist.NodeAwareTransport) memberlist.NodeAwareTransport
	// since, if not 0, is the start time the node reports (tests forge one).
	since int64
	// compress keeps memberlist's compression on (tests: a node as electord
	// ran before it turned compression off).
	compress bool
}

// Validate checks the configuration. Each error starts with the config key
// it is about.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, a...)))
	}
	if c.Self.ID == 0 {
		bad("id", "must be set to a non-zero node id")
	}
	if _, _, err := splitBind(c.BindAddr); err != nil {
		bad("gossip-addr", "%v", err)
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := splitAdvertise(c.AdvertiseAddr); err != nil {
			bad("advertise-host", "%v", err)
		}
	}
	for _, j := range c.Join {
		if _, _, err := splitSeed(j); err != nil {
			bad("join", "%v", err)
		}
	}
	if c.BootstrapExpect < 0 {
		bad("bootstrap-expect", "must be 0 (off) or the number of nodes the cluster starts with, got %d", c.BootstrapExpect)
	}
	if len(c.Label) > 255 {
		bad("gossip-label", "at most 255 bytes, got %d", len(c.Label))
	}
	if n := metaSize(c.Self, c.Settings); n > memberlist.MetaMaxSize {
		bad("name, peer-addr, api-addr, http-addr", "the node's metadata is %d bytes as JSON, more than the %d bytes gossip carries; shorten them", n, memberlist.MetaMaxSize)
	}
	return errors.Join(errs...)
}

// splitBind parses BindAddr: an IP address (or nothing) and a port.
func splitBind(s string) (host string, port int, err error) {
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port: %v", s, err)
	}
	if h != "" && net.ParseIP(h) == nil {
		return "", 0, fmt.Errorf("%q: the host must be an IP address to bind to, got %q", s, h)
	}
	port, err = parsePort(p, true)
	if err != nil {
		return "", 0, fmt.Errorf("%q: %v", s, err)
	}
	if h == "" {
		h = "0.0.0.0"
	}
	return h, port, nil
}

// splitAdvertise parses AdvertiseAddr: a host, and a port or 0 for none.
func splitAdvertise(s string) (host string, port int, err error) {
	host, port, err = splitHostMaybePort(s, 0)
	if err != nil {
		return "", 0, fmt.Errorf("%q: %v", s, err)
	}
	return host, port, nil
}

// splitSeed parses a Join seed: a host, and its port or DefaultGossipPort.
func splitSeed(s string) (host string, port int, err error) {
	host, port, err = splitHostMaybePort(s, DefaultGossipPort)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port or a DNS name: %v", s, err)
	}
	return host, port, nil
}

// splitHostMaybePort accepts "host:port", "[v6]:port", "host", "[v6]" and a
// bare IPv6 address. The host is an IP address or a DNS name.
func splitHostMaybePort(s string, defPort int) (string, int, error) {
	if s == "" {
		return "", 0, errors.New("empty")
	}
	if strings.ContainsAny(s, " /\t") {
		return "", 0, errors.New("contains a space or a slash")
	}
	host, port := s, defPort
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := parsePort(p, false)
		if err != nil {
			return "", 0, err
		}
		host, port = h, n
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	} else if strings.Count(s, ":") == 1 {
		return "", 0, err // "host:" or "host:x"
	}
	if host == "" {
		return "", 0, errors.New("no host")
	}
	if net.ParseIP(host) == nil && !validDNSName(host) {
		return "", 0, fmt.Errorf("%q is neither an IP address nor a DNS name", host)
	}
	return host, port, nil
}

func parsePort(p string, zeroOK bool) (int, error) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 || (n == 0 && !zeroOK) {
		return 0, fmt.Errorf("bad port %q", p)
	}
	return n, nil
}

// validDNSName is a loose RFC 1123 check: dot-separated labels of letters,
// digits, '-' and '_', none empty or longer than 63 bytes.
func validDNSName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// Preset is a named set of gossip timings.
type Preset struct {
	Name string
	// Doc says what the preset is for and what it gives.
	Doc      string
	Settings []Setting
	// RejoinEvery is how often a joined node looks for configured seeds
	// and once-known members missing from its live view and joins them
	// again (see Membership.RetryJoin).
	RejoinEvery time.Duration
	// RejoinMaxBackoff caps the per-address back-off: an address whose join
	// failed is tried again after RejoinEvery, then twice that, and so on up
	// to this, so a member gone for good costs one failed connect per cap.
	RejoinMaxBackoff time.Duration
}

// Setting is one memberlist.Config field a preset sets.
type Setting struct {
	// Field is the memberlist.Config field name.
	Field string
	// Value is a time.Duration or an int, as the field is.
	Value any
	// Doc says what the field does and why this value.
	Doc string
}

func (s Setting) String() string { return fmt.Sprintf("%s=%v", s.Field, s.Value) }

// presets are the timing tables. "lan" restates memberlist.DefaultLANConfig
// (a test keeps them equal) so that docs can print it; "local" is for nodes
// on one machine: loopback round trips take microseconds, so every period is
// cut to detect a death in about a second instead of about five.
var presets = []Preset{
	{
		Name: "lan",
		Doc: "memberlist's DefaultLANConfig, for nodes on one network. A crashed node is " +
			"declared dead after one probe round (members x 1s) + 0.5s + a 4s suspicion " +
			"(longer above 10 nodes): about 5-7s in a small cluster. A clean leave is seen in " +
			"well under a second.",
		Settings: []Setting{
			{"ProbeInterval", 1 * time.Second, "each node probes one random member this often; with n members a given node is probed about every n seconds"},
			{"ProbeTimeout", 500 * time.Millisecond, "how long a direct probe waits for its ack: a generous LAN round trip"},
			{"IndirectChecks", 3, "members asked to probe a node that missed a direct probe, so one lossy path does not condemn it"},
			{"SuspicionMult", 4, "a suspect is declared dead after SuspicionMult x max(1, log10 n) x ProbeInterval (4s), giving it time to refute"},
			{"SuspicionMaxTimeoutMult", 6, "the suspicion timeout starts at this multiple of the above and shrinks as other members confirm the suspicion"},
			{"AwarenessMaxMultiplier", 8, "an overloaded node (its own probes failing) slows its probing by up to this factor instead of accusing healthy members"},
			{"GossipInterval", 200 * time.Millisecond, "how often queued updates (joins, leaves, suspicions) are sent to random members"},
			{"GossipNodes", 3, "members each gossip round goes to"},
			{"RetransmitMult", 4, "an update is sent RetransmitMult x ceil(log10(n+1)) times, enough to reach every member with high probability"},
			{"GossipToTheDeadTime", 30 * time.Second, "dead members still receive gossip this long, so a falsely accused one learns it and refutes; then its name is forgotten"},
			{"PushPullInterval", 30 * time.Second, "a full state exchange with one random member over TCP, which repairs anything gossip lost"},
			{"TCPTimeout", 10 * time.Second, "timeout of TCP work: joins, push/pull, fallback pings; a join to an unreachable seed waits this long"},
		},
		RejoinEvery:      2 * time.Second,
		RejoinMaxBackoff: 8 * time.Second,
	},
	{
		Name: "local",
		Doc: "for nodes on one machine (dev clusters, tests): loopback round trips take " +
			"microseconds, so every period is cut. A crashed node is declared dead after one " +
			"probe round (members x 0.2s) + 0.1s + a 0.4s suspicion: about 1s with 3 nodes.",
		Settings: []Setting{
			{"ProbeInterval", 200 * time.Millisecond, "probe one random member 5 times a second: cheap on loopback, and it bounds detection time"},
			{"ProbeTimeout", 100 * time.Millisecond, "a loopback ack takes microseconds; 100ms leaves room for a busy machine (tests under -race) and stays below ProbeInterval"},
			{"IndirectChecks", 1, "on one machine every indirect path is the same loopback, so more helpers add nothing"},
			{"SuspicionMult", 2, "suspicion lasts 2 x ProbeInterval = 0.4s; 2 also means no confirmations are awaited (memberlist waits for SuspicionMult-2), so the timeout is fixed"},
			{"SuspicionMaxTimeoutMult", 3, "unused while SuspicionMult is 2 (nothing to confirm); kept small should SuspicionMult be raised"},
			{"AwarenessMaxMultiplier", 4, "an overloaded node slows its probing at most 4x (0.8s), so tests on a busy machine still see deaths within seconds"},
			{"GossipInterval", 50 * time.Millisecond, "updates (joins, leaves) spread within a few tens of milliseconds"},
			{"GossipNodes", 3, "members each gossip round goes to: all of a small dev cluster"},
			{"RetransmitMult", 3, "an update is sent 3 x ceil(log10(n+1)) times; loopback seldom drops, and Leave waits for these sends"},
			{"GossipToTheDeadTime", 2 * time.Second, "a dead member's name is forgotten after 2s, so a node restarted on another port is accepted quickly"},
			{"PushPullInterval", 1 * time.Second, "a full state sync with one random member every second repairs lost gossip within a few seconds (a CI run once saw a node miss two joins for 9.5s with 5s); the state of a dev cluster is a few hundred bytes over loopback TCP"},
			{"TCPTimeout", 1 * time.Second, "loopback connects at once or is refused; 1s bounds a join to a seed that is not up"},
		},
		RejoinEvery:      1 * time.Second,
		RejoinMaxBackoff: 2 * time.Second,
	},
}

// Presets returns the timing presets, for docs and --help.
func Presets() []Preset {
	out := make([]Preset, len(presets))
	for i, p := range presets {
		p.Settings = append([]Setting(nil), p.Settings...)
		out[i] = p
	}
	return out
}

// PresetNamed returns the preset called name, or an error listing the
// presets. It is the one check of the gossip-preset key: config.Validate
// calls it for the user's value, and New for the Preset it is given.
func PresetNamed(name string) (Preset, error) {
	names := make([]string, len(presets))
	for i, p := range presets {
		if p.Name == name {
			return p, nil
		}
		names[i] = p.Name
	}
	return Preset{}, fmt.Errorf("must be %s, got %q", strings.Join(names, " or "), name)
}

// apply sets the preset's fields on c.
func (p Preset) apply(c *memberlist.Config) error {
	v := reflect.ValueOf(c).Elem()
	for _, s := range p.Settings {
		f := v.FieldByName(s.Field)
		val := reflect.ValueOf(s.Value)
		if !f.IsValid() || !f.CanSet() || f.Type() != val.Type() {
			return fmt.Errorf("membership: preset %s: memberlist.Config has no settable %s of type %T", p.Name, s.Field, s.Value)
		}
		f.Set(val)
	}
	return nil
}
