package config

import (
	"time"

	"github.com/electord/electord/transport"
)

// Defaults, each with the reason for its value.
const (
	// DefaultHeartbeatInterval: followers check the leader 5 times a second.
	// An idle node's CPU is its wakeups, and a heartbeat round trip (a
	// grpc-go unary call and the node's answer) is most of them: at 50ms a
	// follower cost 1.1-2.2% of a core, at 200ms 0.4% (docs/BENCHMARKS.md,
	// "Idle cost and scale"), which is what 128 nodes on 2 cores need. A
	// crashed leader is not found by missed heartbeats any more but by its
	// refused connection (transport.ErrPeerDown, tens of milliseconds), so
	// the interval only bounds how soon a silent leader is noticed.
	DefaultHeartbeatInterval = 200 * time.Millisecond
	// DefaultHeartbeatTimeout: three missed heartbeats before suspecting a
	// silent leader (host down, paused, cut off), the least quorum mode
	// allows (lease = timeout - interval = 400ms, two heartbeats). The
	// trade-off: a silent leader is suspected after 0.6-0.75s (timeout plus a
	// jitter of up to a quarter of it) instead of 0.25-0.31s; with the
	// election, 5 nodes measured 0.6-0.7s for bully and 1.1-1.7s for ring
	// (0.8-1.2s and 6-7s at 50ms/250ms, when messages waited behind the
	// silent leader's queued heartbeats). A CPU-starved node has 600ms of
	// slack instead of 250ms before it raises a false alarm.
	// Kept at 600ms, not more, so that timeout plus jitter stays under a
	// second: how long a cut-off follower may still name its old leader.
	DefaultHeartbeatTimeout = 600 * time.Millisecond
	// DefaultPeerServer is the inbound peer server; see docs/BENCHMARKS.md
	// ("Peer servers") for the measurements behind the choice.
	DefaultPeerServer = "lf"
	// DefaultTick is the instance loop's clock; timeouts are rounded up to it.
	DefaultTick = 10 * time.Millisecond

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
	// peer message of the largest size (transport.DefaultMaxMessageBytes).
	MinPeerMaxBufferedBytes = 1 << 20
	// DefaultMaxMessageBytes bounds a peer message, sent or received, and an
	// API request (transport.DefaultMaxMessageBytes).
	DefaultMaxMessageBytes = transport.DefaultMaxMessageBytes
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
	// server may hold its slot (transport.PeerStreamDeadline); it must be
	// above transport.MaxHeartbeatWait, the longest a Heartbeat handler
	// legitimately waits.
	DefaultPeerStreamTimeout = transport.PeerStreamDeadline
	// DefaultMaxWatchers bounds open watches (/watch and WatchLeader).
	DefaultMaxWatchers = 1024
	// DefaultHandshakeTimeout closes a peer or API connection that has not
	// finished its HTTP/2 handshake (a client that connects and says
	// nothing).
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultIdleTimeout closes a peer or API connection with no stream.
	DefaultIdleTimeout = 5 * time.Minute
)
