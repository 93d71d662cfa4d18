package config

import (
	"runtime"
	"time"
)

// Default returns a node's configuration with every default: what
// `electord run` starts from before its file, environment and flags, and
// what the dev cluster and the tests build on. Each value's reason is on its
// constant below, or here where it has none. ID has no default: every node
// needs its own.
func Default() Config {
	return Config{
		Algorithm: DefaultAlgorithm,
		// Loopback addresses: a node is reachable from other machines only
		// when its operator says so (and then needs TLS, or insecure).
		PeerAddr:   "127.0.0.1:7071",
		GossipAddr: "127.0.0.1:7946",
		APIAddr:    "127.0.0.1:7070",
		HTTPAddr:   "127.0.0.1:4040",

		HeartbeatInterval: DefaultHeartbeatInterval,
		HeartbeatTimeout:  DefaultHeartbeatTimeout,
		Tick:              DefaultTick,
		// lan restates memberlist's DefaultLANConfig, made for nodes on one
		// network (membership.Presets).
		GossipPreset: "lan",
		PeerServer:   DefaultPeerServer,
		// 0: two pool goroutines per GOMAXPROCS (PeerWorkerCount), so the
		// pool follows the CPUs the process may use.
		PeerWorkers: 0,
		MaxProcs:    DefaultMaxProcs,
		// info: state changes and warnings, what an operator follows; text
		// for people at a terminal (json for log collectors).
		LogLevel:  "info",
		LogFormat: "text",

		CandidateProbePeriod:    DefaultCandidateProbePeriod,
		CandidateProbeTimeout:   DefaultCandidateProbeTimeout,
		CandidateProbeFailures:  DefaultCandidateProbeFailures,
		CandidateProbeSuccesses: DefaultCandidateProbeSuccesses,

		SpreadImbalance:         DefaultSpreadImbalance,
		SpreadRebalanceInterval: DefaultSpreadRebalanceInterval,
		SpreadRebalanceBatch:    DefaultSpreadRebalanceBatch,

		// The leader Service follows the node's own election unless told
		// a named one: the behaviour from before named elections existed.
		K8sLeaderElection: DefaultK8sLeaderElection,

		MaxConns:             DefaultMaxConns,
		MaxStreams:           DefaultMaxStreams,
		PeerMaxStreams:       DefaultPeerMaxStreams,
		MaxWatchers:          DefaultMaxWatchers,
		HandshakeTimeout:     DefaultHandshakeTimeout,
		IdleTimeout:          DefaultIdleTimeout,
		PeerMaxBufferedBytes: DefaultPeerMaxBufferedBytes,
		MaxMessageBytes:      DefaultMaxMessageBytes,
		MaxHeaderListBytes:   DefaultMaxHeaderListBytes,
		PeerStreamTimeout:    DefaultPeerStreamTimeout,
	}
}

// PeerWorkerCount is the lf pool's size: peer-workers, or two goroutines per
// GOMAXPROCS when it is 0, so that while one polls, others handle events on
// every CPU the process may use.
func (c Config) PeerWorkerCount() int {
	if c.PeerWorkers > 0 {
		return c.PeerWorkers
	}
	return runtime.GOMAXPROCS(0) * 2
}

// Defaults, each with the reason for its value.
const (
	// DefaultK8sLeaderElection is the default election (""): a Service
	// configured before named elections existed keeps routing to the
	// node that leads.
	DefaultK8sLeaderElection = ""
	// DefaultAlgorithm is Bully (Garcia-Molina): the live node of the
	// highest rank leads. Ring (Chang-Roberts) is the other choice;
	// docs/ALGORITHMS.md compares them. Validate checks the name against
	// election/algorithms.
	DefaultAlgorithm = "bully"
	// DefaultHeartbeatInterval: followers check the leader 5 times a second.
	// An idle node's CPU is its wakeups, and a heartbeat round trip (a
	// grpc-go unary call and the node's answer) is most of them: at 200ms a
	// follower costs 0.4% of a core, against 1.1-2.2% at 50ms
	// (docs/BENCHMARKS.md, "Idle cost and scale"), which is what 128 nodes
	// on 2 cores need. A crashed leader is found by its refused connection
	// (transport.ErrPeerDown, tens of milliseconds), not by missed
	// heartbeats, so the interval only bounds how soon a silent leader is
	// noticed.
	DefaultHeartbeatInterval = 200 * time.Millisecond
	// DefaultHeartbeatTimeout: three missed heartbeats before suspecting a
	// silent leader (host down, paused, cut off), the least quorum mode
	// allows (lease = timeout - interval = 400ms, two heartbeats). The
	// trade-off: a silent leader is suspected after 0.6-0.75s (timeout plus a
	// jitter of up to a quarter of it); with the election, 5 nodes replace
	// it in 0.6-0.7s with bully and 1.1-1.7s with ring. A CPU-starved node
	// has 600ms of slack before it raises a false alarm. Not more than
	// 600ms, so that timeout plus jitter stays under a second: how long a
	// cut-off follower may still name its old leader.
	DefaultHeartbeatTimeout = 600 * time.Millisecond
	// DefaultMaxProcs: an idle node's goroutines run on one CPU at a time
	// (GOMAXPROCS=1). The node's work is one loop goroutine and the I/O
	// around it; with more Ps, each wakeup (a heartbeat in, its answer
	// out) is handed between OS threads, and an idle 5-node cluster costs
	// 15-20% more CPU (leader 0.43-0.57% of a core against 0.33-0.50%),
	// while crash, resign and transfer times are the same
	// (docs/BENCHMARKS.md, "Idle cost and scale"). What one CPU costs is
	// peak API throughput; a node that serves heavy API traffic sets 0.
	DefaultMaxProcs = 1
	// DefaultPeerServer is the inbound peer server; see docs/BENCHMARKS.md
	// ("Peer servers") for the measurements behind the choice.
	DefaultPeerServer = "lf"
	// DefaultTick is the instance loop's clock; timeouts are rounded up to it.
	DefaultTick = 10 * time.Millisecond

	// DefaultCandidateProbePeriod: the candidate probe asks the app once a
	// second. A dead app is found by its refused connection on the next
	// probe, so the period is most of the time from an app's death to the
	// handover (half a period on average, a whole one at worst): Kubernetes
	// probes default to 10s, which would leave a dead app's node leading
	// for up to 10s. One local HTTP request a second costs the node and the
	// app next to nothing; a shorter period (100ms) is for apps whose
	// leadership must move faster.
	DefaultCandidateProbePeriod = time.Second
	// DefaultCandidateProbeTimeout: a local health endpoint answers in
	// milliseconds; an app that takes half a second is hung or starved. At
	// most the period, so one probe ends before the next is due.
	DefaultCandidateProbeTimeout = 500 * time.Millisecond
	// DefaultCandidateProbeFailures: two failed probes in a row (a timeout,
	// a 5xx) before the node stops standing, so one slow answer (a GC
	// pause, a busy app) does not move leadership; a refused connection
	// (the app's process is gone) counts at once, whatever this says.
	// Kubernetes' failureThreshold is 3, at a 10s period.
	DefaultCandidateProbeFailures = 2
	// DefaultCandidateProbeSuccesses: one passed probe and the node stands
	// again (Kubernetes' successThreshold is 1 too); standing again is
	// sticky, so it moves no leadership by itself.
	DefaultCandidateProbeSuccesses = 1
	// MinCandidateProbePeriod: the probe is one goroutine and one request at
	// a time; below 10ms it would mostly measure the scheduler.
	MinCandidateProbePeriod = 10 * time.Millisecond

	// DefaultMaxConns bounds open connections per listener (peer, api,
	// http): more wait in the kernel's accept queue. A cluster of n nodes
	// holds about n peer connections per node.
	DefaultMaxConns = 1024
	// DefaultMaxStreams bounds concurrent streams per API connection.
	DefaultMaxStreams = 100
	// DefaultPeerMaxStreams bounds concurrent streams per peer connection:
	// a peer sends one message at a time on a link, so a few are plenty,
	// and each may hold a message of up to 1 MiB while it arrives.
	DefaultPeerMaxStreams = 16
	// DefaultPeerMaxBufferedBytes bounds the request bytes the peer server
	// buffers for all its connections together (lf.DefaultMaxBufferedBytes):
	// the lf pool counts the bytes; grpc-go, whose every stream may buffer a
	// whole flow-control window of one message (1 MiB), takes it as at most
	// 32 streams in flight at once. A cluster's peers send one message at
	// a time each, and most are answered within a millisecond.
	DefaultPeerMaxBufferedBytes = 32 << 20
	// MinPeerMaxBufferedBytes is the least peer-max-buffered-bytes: one
	// peer message of the largest size (DefaultMaxMessageBytes).
	MinPeerMaxBufferedBytes = 1 << 20
	// DefaultMaxMessageBytes bounds a peer message, sent or received, and an
	// API request. An election message is a few hundred bytes; 1 MiB leaves
	// room for any member list a cluster gossips, and a grpc peer stream's
	// flow-control window is one such message.
	DefaultMaxMessageBytes = 1 << 20
	// MinMaxMessageBytes: election messages and API requests are a few
	// hundred bytes; 4 KiB leaves them room.
	MinMaxMessageBytes = 4 << 10
	// MaxMaxMessageBytes: a grpc peer stream's flow-control window is one
	// message, and peer-max-buffered-bytes is counted in such windows: a
	// larger message would make a single stream hold most of the budget.
	MaxMaxMessageBytes = 64 << 20
	// DefaultMaxHeaderListBytes bounds a request's header list on every
	// server (engine.DefaultMaxHeaderListBytes).
	DefaultMaxHeaderListBytes = 16 << 10
	// MinMaxHeaderListBytes leaves room for gRPC's own headers and a
	// grpc-timeout; MaxMaxHeaderListBytes keeps a header list far below a
	// message (a header list is held whole before a handler runs).
	MinMaxHeaderListBytes = 1 << 10
	MaxMaxHeaderListBytes = 1 << 20
	// DefaultPeerStreamTimeout bounds how long a stream of the grpc peer
	// server may hold its slot in the buffer budget: it must be above
	// MaxHeartbeatWait, the longest a Heartbeat handler legitimately waits,
	// and 5 s more gives a heartbeat's answer time to leave.
	DefaultPeerStreamTimeout = MaxHeartbeatWait + 5*time.Second
	// MaxHeartbeatWait is the longest the peer server's Heartbeat handler
	// waits for the node's answer (transport.MaxHeartbeatWait; a test keeps
	// the two equal). It is no setting: peer-stream-timeout is checked
	// against it.
	MaxHeartbeatWait = 10 * time.Second
	// DefaultMaxWatchers bounds open watches (/watch and WatchLeader).
	DefaultMaxWatchers = 1024
	// DefaultHandshakeTimeout closes a peer or API connection that has not
	// finished its HTTP/2 handshake, or a sidecar connection (http-tls) its
	// TLS handshake (a client that connects and says nothing): ample for a
	// TLS and HTTP/2 handshake across a loaded network, short enough that
	// silent connections do not pile up.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultIdleTimeout closes a peer or API connection with no stream. A
	// peer connection carries a heartbeat every heartbeat-interval, so only
	// a connection nobody uses goes idle.
	DefaultIdleTimeout = 5 * time.Minute
)

// Lifetimes of the certificates `electord certs` and `electord dev --tls`
// create (the certs command's --lifetime overrides them).
const (
	// DefaultCALifetime: the CA signs every node and client; replacing it
	// means re-issuing them all, so it lasts ten years.
	DefaultCALifetime = 10 * 365 * 24 * time.Hour
	// DefaultLeafLifetime: node and client certificates are re-issued in
	// place (nodes reload them without a restart), so a year bounds what a
	// stolen key is good for without making renewal frequent.
	DefaultLeafLifetime = 365 * 24 * time.Hour
)
