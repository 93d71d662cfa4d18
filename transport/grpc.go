package transport

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/election"
	"github.com/electord/electord/internal/msglimit"
	pb "github.com/electord/electord/proto/electord/v1"
	"github.com/electord/electord/transport/peerauth"
)

// Defaults for GRPCConfig.
const (
	DefaultSendTimeout      = 500 * time.Millisecond
	DefaultQueueLen         = 256
	DefaultReconnectBackoff = time.Second
)

// Errors reported through Receiver.Failed.
var (
	// ErrUnknownPeer: Send to an id without an address (SetPeer), or a
	// message still queued when RemovePeer forgot its peer.
	ErrUnknownPeer = errors.New("transport: unknown peer")
	// ErrQueueFull: the peer's send queue was full.
	ErrQueueFull = errors.New("transport: peer send queue is full")
	// ErrClosed: the transport is closed.
	ErrClosed = errors.New("transport: closed")
	// ErrPeerSilent: the message was queued behind one whose RPC reached
	// its deadline without an answer, and was failed without being sent.
	ErrPeerSilent = errors.New("transport: peer did not answer the message before this one in time")
)

// GRPCConfig configures NewGRPC.
type GRPCConfig struct {
	// Self is this node's id; heartbeat replies must be addressed to it.
	Self election.NodeID
	// Receiver gets failures and heartbeat replies. Required.
	Receiver Receiver
	// SendTimeout is each RPC's deadline (default DefaultSendTimeout).
	SendTimeout time.Duration
	// MaxMessageBytes limits what this side sends and accepts as a reply
	// (the max-message-bytes key; required). A larger message fails locally
	// with ResourceExhausted, its text naming the key and both sizes, as
	// does one a peer refuses for its own limit.
	MaxMessageBytes int
	// QueueLen is the per-peer send queue length (default DefaultQueueLen).
	QueueLen int
	// ReconnectBackoff caps the delay between reconnection attempts to a
	// peer that is down (default DefaultReconnectBackoff); gRPC's own default
	// (two minutes) would keep a restarted peer unreachable for too long.
	ReconnectBackoff time.Duration
	// DialOptions are added to every connection's options (after the
	// transport's own: insecure credentials, size limits, backoff).
	DialOptions []grpc.DialOption
	// ProbeTimeout bounds the one plain TCP re-dial that confirms a peer's
	// refused or reset connection (default DefaultProbeTimeout; negative:
	// never probe, so never report ErrPeerDown).
	ProbeTimeout time.Duration
	// TLS, if not nil, turns on mutual TLS: it is the base client
	// configuration (this node's certificate and the roots). Each peer's
	// connection dials with peerauth.ClientConfig(TLS, Cluster, id), so the
	// server must present a certificate naming exactly the node id the
	// message is for. nil: insecure, as before.
	TLS *tls.Config
	// Cluster is the cluster name in the peers' certificates; required with
	// TLS.
	Cluster string
	// TLSPool, if set, is the CA pool of the moment, read at every
	// handshake (peerauth.ClientConfigPool); nil: TLS's RootCAs.
	TLSPool func() *x509.CertPool
}

// GRPC is the Transport over grpc-go. It holds one grpc.ClientConn per peer,
// created on the first message sent to it and replaced when the peer's
// address changes or an RPC on it went unanswered (see grpcLink.drop), and
// one goroutine per peer that sends that peer's messages
// in order from a bounded queue. Each message is one unary RPC with a
// SendTimeout deadline and without wait-for-ready, so an unreachable peer
// fails fast. A Heartbeat's reply is handed to the local node through
// Receiver.Receive; a MsgHeartbeatResp the node sends goes out as Notify.
//
// All methods are safe for concurrent use. Receiver methods are called from
// the transport's goroutines, never from inside Send/SetPeer/RemovePeer and
// never under a transport lock.
type GRPC struct {
	cfg GRPCConfig
	q   *sendQueues

	sent    [election.LastMsgType + 1]atomic.Uint64
	failed  [election.LastMsgType + 1]atomic.Uint64
	replies atomic.Uint64
	dropped atomic.Uint64
	// peersDown counts ErrPeerDown reports.
	peersDown atomic.Uint64
}

var _ Transport = (*GRPC)(nil)

// grpcLink is one peer's connection: dialed on its first message, replaced
// when the peer's address changes or an RPC on it timed out.
type grpcLink struct {
	t  *GRPC
	id election.NodeID

	mu     sync.Mutex
	addr   string
	conn   *grpc.ClientConn
	client pb.PeerClient
	// tcp: conn's TCP connections, aborted when conn is dropped (nil for
	// a unix socket target).
	tcp *tcpConns
	// delivered: an RPC succeeded since the watcher last saw the
	// connection leave Ready (see watch).
	delivered atomic.Bool
	// noBatchUntil (UnixNano): the peer answered a Batch with
	// Unimplemented (an older node); until then its messages go one call
	// each (see batchRetry).
	noBatchUntil atomic.Int64
	// noHeartbeatsUntil is noBatchUntil for the Heartbeats call.
	noHeartbeatsUntil atomic.Int64
	// noBatchedHeartbeatsUntil is noBatchUntil for Heartbeats in a Batch
	// (a peer that serves Batch but answered none of them).
	noBatchedHeartbeatsUntil atomic.Int64
}

// NewGRPC returns a transport for node cfg.Self. It opens no connection.
func NewGRPC(cfg GRPCConfig) (*GRPC, error) {
	if cfg.Self == 0 {
		return nil, errors.New("transport: GRPCConfig.Self is zero")
	}
	if cfg.Receiver == nil {
		return nil, errors.New("transport: GRPCConfig.Receiver is nil")
	}
	if cfg.MaxMessageBytes <= 0 {
		return nil, fmt.Errorf("transport: GRPCConfig.MaxMessageBytes (max-message-bytes) must be positive, got %d", cfg.MaxMessageBytes)
	}
	if cfg.TLS != nil && cfg.Cluster == "" {
		return nil, errors.New("transport: GRPCConfig.TLS is set without a Cluster to check peers against")
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = DefaultSendTimeout
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = DefaultQueueLen
	}
	if cfg.ReconnectBackoff <= 0 {
		cfg.ReconnectBackoff = DefaultReconnectBackoff
	}
	if cfg.ProbeTimeout == 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	t := &GRPC{cfg: cfg}
	t.q = newSendQueues(cfg.Receiver, cfg.QueueLen,
		func(id election.NodeID, addr string) link { return &grpcLink{t: t, id: id, addr: addr} }, t.countFailed)
	return t, nil
}

// ClientStats is a snapshot of a GRPC transport's counters.
type ClientStats struct {
	// Sent counts messages whose RPC succeeded, by type.
	Sent map[election.MsgType]uint64
	// Failed counts messages that could not be delivered, by type
	// (including those dropped by Close).
	Failed map[election.MsgType]uint64
	// Replies counts heartbeat replies handed to the local node.
	Replies uint64
	// RepliesDropped counts heartbeat replies that were invalid or that the
	// local node refused.
	RepliesDropped uint64
	// PeersDown counts failures reported as ErrPeerDown.
	PeersDown uint64
}

// Stats returns a snapshot of the counters. Safe for concurrent use.
func (t *GRPC) Stats() ClientStats {
	st := ClientStats{
		Sent:           make(map[election.MsgType]uint64),
		Failed:         make(map[election.MsgType]uint64),
		Replies:        t.replies.Load(),
		RepliesDropped: t.dropped.Load(),
		PeersDown:      t.peersDown.Load(),
	}
	for i := range t.sent {
		if n := t.sent[i].Load(); n > 0 {
			st.Sent[election.MsgType(i)] = n
		}
		if n := t.failed[i].Load(); n > 0 {
			st.Failed[election.MsgType(i)] = n
		}
	}
	return st
}

func (t *GRPC) countFailed(m election.Message) {
	if int(m.Type) < len(t.failed) {
		t.failed[m.Type].Add(1)
	} else {
		t.failed[0].Add(1)
	}
}

// Send queues m for m.To and returns at once. If m.To has no address or its
// queue is full, Receiver.Failed(m, ErrUnknownPeer/ErrQueueFull) is called
// from a new goroutine. After Close, m is dropped (counted as failed, no
// Failed call). Safe for concurrent use; never blocks on the network.
func (t *GRPC) Send(m election.Message) { t.q.send(m) }

// SetPeer records the address of id. A new peer gets its queue and sending
// goroutine now and its connection on its first message; an address change
// closes the old connection (an RPC in flight on it fails) and the next
// message dials the new address, keeping the queue and its order. addr is a
// host:port (dialed as "passthrough:///addr", without a resolver) or any
// gRPC target with a scheme. Ignored after Close. Safe for concurrent use.
func (t *GRPC) SetPeer(id election.NodeID, addr string) { t.q.setPeer(id, addr) }

// RemovePeer forgets id and closes its connection. Messages still queued for
// it are reported through Receiver.Failed with ErrUnknownPeer; one in flight
// fails (canceled). Safe for concurrent use.
func (t *GRPC) RemovePeer(id election.NodeID) { t.q.removePeer(id) }

// Connect implements Connector.
func (t *GRPC) Connect(id election.NodeID) {
	if l, ok := t.q.linkOf(id).(*grpcLink); ok {
		l.connect()
	}
}

// Close stops every peer goroutine, closes every connection and waits for
// the transport's goroutines to end. Messages still queued are dropped
// without a Failed call. Safe to call more than once and concurrently.
func (t *GRPC) Close() error {
	t.q.close()
	return nil
}

func (l *grpcLink) setAddr(addr string) {
	l.mu.Lock()
	var old *grpc.ClientConn
	if l.addr != addr {
		old, l.addr, l.conn, l.client, l.tcp = l.conn, addr, nil, nil, nil
	}
	l.mu.Unlock()
	if old != nil {
		// Close does not call back into the transport and does not block
		// on the network.
		_ = old.Close()
	}
}

func (l *grpcLink) close() {
	l.mu.Lock()
	conn := l.conn
	l.conn, l.client, l.tcp = nil, nil, nil
	l.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

// drop closes conn, a connection on which an RPC went unanswered for its
// whole deadline or could not connect (dialFailed), if it is still the
// link's: the next message dials a new one. A peer that is cut off leaves what was written on the old
// connection unacknowledged, and TCP retransmits it with a timeout that
// doubles each time (0.2 s, 0.4 s, ... up to two minutes): after a cut of
// ten seconds the old connection carries nothing until the next
// retransmission, seconds after the link is back, and every message sent
// on it meanwhile waits behind the lost ones. A new connection's handshake
// goes out when its message does, so the first message after the heal
// gets through in a round trip. A peer that was only slow loses its
// connection, and pays a handshake on its next message.
func (l *grpcLink) drop(conn *grpc.ClientConn) {
	l.mu.Lock()
	var tcp *tcpConns
	if l.conn != conn {
		conn = nil // replaced meanwhile (SetPeer, close): not ours to close
	} else {
		l.conn, l.client, tcp = nil, nil, l.tcp
		l.tcp = nil
	}
	l.mu.Unlock()
	if conn != nil {
		if tcp != nil {
			tcp.abort()
		}
		_ = conn.Close()
	}
}

// dialFailed reports whether err, an RPC's error, says that the connection
// could not be made (or was lost) for another reason than the peer's kernel
// refusing or resetting it: a dial that timed out, as it does while the
// peer is cut off. grpc-go keeps such a connection in its reconnect
// back-off (up to ReconnectBackoff) and fails every call on it at once
// meanwhile, also after the link is back; a new connection dials when its
// message goes. A refused or reset connection keeps its own handling (the
// confirming probe, the resend to a restarted peer).
func dialFailed(err error) bool {
	return status.Code(err) == codes.Unavailable && !refusedOrReset(err)
}

// holds reports whether conn is the link's connection.
func (l *grpcLink) holds(conn *grpc.ClientConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conn == conn
}

// connect dials and leaves the connection's idle state, so it connects in
// the background (and the watcher follows it) before the first send.
func (l *grpcLink) connect() {
	if conn, _, err := l.dial(); err == nil {
		conn.Connect()
	}
}

// dial returns the peer's connection and its client, dialing (lazily,
// without I/O) if needed.
func (l *grpcLink) dial() (*grpc.ClientConn, pb.PeerClient, error) {
	t := l.t
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.client != nil {
		return l.conn, l.client, nil
	}
	target := l.addr
	var tcp *tcpConns
	if !strings.Contains(target, ":///") && !strings.HasPrefix(target, "unix:") {
		target = "passthrough:///" + target
		tcp = &tcpConns{}
	}
	bo := backoff.DefaultConfig
	bo.BaseDelay = 50 * time.Millisecond
	if bo.BaseDelay > t.cfg.ReconnectBackoff {
		bo.BaseDelay = t.cfg.ReconnectBackoff
	}
	bo.MaxDelay = t.cfg.ReconnectBackoff
	creds := insecure.NewCredentials()
	if t.cfg.TLS != nil {
		// One ClientConn per peer id: the id it must answer as is known.
		creds = credentials.NewTLS(peerauth.ClientConfigPool(t.cfg.TLS, t.cfg.Cluster, l.id, t.cfg.TLSPool))
	}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallSendMsgSize(t.cfg.MaxMessageBytes),
			grpc.MaxCallRecvMsgSize(t.cfg.MaxMessageBytes),
			grpc.WaitForReady(false),
		),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: t.cfg.SendTimeout}),
		// A message over the size limit, refused by this side or by a grpc
		// peer server, fails with grpc-go's text, which does not say which
		// key sets the limit: name it (the lf server names it itself).
		grpc.WithChainUnaryInterceptor(msglimit.UnaryClientInterceptor),
		// Static flow-control windows: see staticWindow.
		grpc.WithStaticStreamWindowSize(staticWindow(t.cfg.MaxMessageBytes)),
		grpc.WithStaticConnWindowSize(staticWindow(t.cfg.MaxMessageBytes)),
	}, t.cfg.DialOptions...)
	if tcp != nil {
		// First, so that a dialer in DialOptions (tests) still wins.
		opts = append([]grpc.DialOption{grpc.WithContextDialer(tcp.dialer)}, opts...)
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, nil, err
	}
	l.conn, l.client, l.tcp = conn, pb.NewPeerClient(conn), tcp
	go l.watch(conn, l.id, l.addr)
	return l.conn, l.client, nil
}

// resendSlice is how long a resend to a peer whose port accepted a probe
// waits for a connection before it probes again (see resend).
const resendSlice = 25 * time.Millisecond

// resend sends once more on conn, after the first call failed with failed
// (refused or reset) although a probe of addr was accepted. It reconnects
// now and waits for conn to be ready in slices of resendSlice, probing the
// port after each one that ends without a connection: a restarted peer
// still accepts, and the wait goes on (the connection attempt runs on
// across slices), but a dying one refuses (a SIGKILLed process's kernel
// resets its connections before it closes its listening socket, which may
// complete a probe's handshake meanwhile): then failed is returned at once,
// and a heartbeat's failure is confirmed as ErrPeerDown. Once conn is ready
// it makes one call with the whole of ctx's deadline: the slices bound the
// wait for a connection, never the call, which a connected peer may take
// longer than a slice to answer (a call cut at each slice was made again
// and again, the message delivered up to 20 times, then reported failed).
func (l *grpcLink) resend(ctx context.Context, conn *grpc.ClientConn, call func(context.Context, ...grpc.CallOption) error, failed error, addr string) error {
	conn.ResetConnectBackoff()
	for !waitConnected(ctx, conn, resendSlice) {
		if ctx.Err() != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
		if !probeAccepted(addr, cmp.Or(l.t.cfg.ProbeTimeout, DefaultProbeTimeout)) {
			return failed
		}
	}
	// Ready, or shut down (closed by SetPeer, RemovePeer or Close: the call
	// then fails at once on its own account). Without wait-for-ready: a
	// connection lost meanwhile fails the call instead of waiting again.
	return call(ctx)
}

// waitConnected waits up to d (and no longer than ctx) for conn to be Ready
// or Shutdown, leaving its idle state if need be, and reports whether it is.
func waitConnected(ctx context.Context, conn *grpc.ClientConn, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		switch s := conn.GetState(); s {
		case connectivity.Ready, connectivity.Shutdown:
			return true
		case connectivity.Idle:
			conn.Connect()
			fallthrough
		default:
			if !conn.WaitForStateChange(ctx, s) {
				return false
			}
		}
	}
}

// staticWindow is the HTTP/2 flow-control window of a peer connection: one
// message of the size limit, at least HTTP/2's default of 64 KiB. A fixed
// window turns off grpc-go's BDP estimator, which otherwise answers every
// reply that arrives while no estimate is in flight with a WINDOW_UPDATE and
// a PING, and the peer with a PING ack: an idle follower's heartbeat was two
// round trips on the wire instead of one, and woke both processes twice. Peer
// messages are small and sparse, so a larger window would gain nothing.
func staticWindow(maxMessageBytes int) int32 {
	return int32(min(max(maxMessageBytes, 64<<10), 1<<30))
}

// send makes the RPC for m and reports the outcome. It returns true when the
// RPC reached its own deadline (SendTimeout) while ctx was still live.
func (l *grpcLink) send(ctx context.Context, m election.Message) bool {
	x, err := Encode(m)
	if err != nil {
		l.fail(m, err)
		return false
	}
	var reply *pb.HeartbeatReply
	delivered, silent := l.rpc(ctx, []election.Message{m}, func(ctx context.Context, c pb.PeerClient, opts ...grpc.CallOption) error {
		var err error
		switch x := x.(type) {
		case *pb.Election:
			_, err = c.Election(ctx, x, opts...)
		case *pb.Answer:
			_, err = c.Answer(ctx, x, opts...)
		case *pb.Coordinator:
			_, err = c.Coordinator(ctx, x, opts...)
		case *pb.CoordinatorAck:
			_, err = c.CoordinatorAck(ctx, x, opts...)
		case *pb.Heartbeat:
			reply, err = c.Heartbeat(ctx, x, opts...)
		case *pb.HeartbeatReply:
			_, err = c.Notify(ctx, x, opts...)
		case *pb.TimeoutNow:
			_, err = c.TimeoutNow(ctx, x, opts...)
		case *pb.Candidacy:
			_, err = c.Candidacy(ctx, x, opts...)
		default:
			err = fmt.Errorf("transport: no RPC for %T", x)
		}
		return err
	}, nil)
	if !delivered || reply == nil {
		return silent
	}
	l.received(reply)
	return false
}

// received hands a Heartbeat's reply to the local node, or counts it
// dropped (invalid, or refused by the node).
func (l *grpcLink) received(reply *pb.HeartbeatReply) {
	t := l.t
	r, err := Decode(reply, t.cfg.Self)
	if err != nil {
		t.dropped.Add(1)
		return
	}
	if err := t.cfg.Receiver.Receive(Inbound{Msg: r}); err != nil {
		t.dropped.Add(1)
		return
	}
	t.replies.Add(1)
}

func isHeartbeat(m election.Message) bool { return m.Type == election.MsgHeartbeat }

// fail reports m as not delivered.
func (l *grpcLink) fail(m election.Message, err error) {
	l.t.countFailed(m)
	l.t.cfg.Receiver.Failed(m, err)
}

// rpc makes one call that carries ms (one message, or a Batch of them) and
// reports each as failed if the call fails, unless spare (if not nil) says
// the caller handles that error itself. delivered: the call succeeded
// (every message counted as sent); silent: it reached its own deadline
// (SendTimeout) while ctx was still live.
func (l *grpcLink) rpc(ctx context.Context, ms []election.Message, call func(context.Context, pb.PeerClient, ...grpc.CallOption) error, spare func(error) bool) (delivered, silent bool) {
	t := l.t
	conn, c, err := l.dial()
	if err != nil {
		for _, m := range ms {
			l.fail(m, err)
		}
		return false, false
	}
	l.mu.Lock()
	addr := l.addr
	l.mu.Unlock()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, t.cfg.SendTimeout)
	defer cancel()
	bound := func(ctx context.Context, opts ...grpc.CallOption) error { return call(ctx, c, opts...) }
	err = bound(ctx)
	if err != nil && refusedOrReset(err) && ctx.Err() == nil && t.cfg.ProbeTimeout >= 0 && probeAccepted(addr, cmp.Or(t.cfg.ProbeTimeout, DefaultProbeTimeout)) {
		// The channel failed at once on an error it keeps from before
		// (gRPC fails calls fast while it backs off from a refused dial),
		// but the peer's port accepts connections again: its process is
		// back (a restart). Reconnect now and send once more, rather than
		// report a live peer as failed: a ring token forwarded past it was
		// lost and cost a whole round timeout (700 ms).
		err = l.resend(ctx, conn, bound, err, addr)
	}
	if err != nil && spare != nil && spare(err) {
		return false, false
	}
	if err != nil {
		hbErr := err // what a heartbeat of ms is failed with
		if ctx.Err() == nil && slices.ContainsFunc(ms, isHeartbeat) {
			// A refused or reset heartbeat (or a call that carries some),
			// confirmed by one re-dial, is evidence that the peer's
			// process is gone (ErrPeerDown). Only the heartbeats say so:
			// a one-way message that failed is reported as it was.
			hbErr = t.peerDown(err, addr)
		}
		// Timed out: our deadline fired, or the server's copy of it did
		// first and its DeadlineExceeded arrived before our timer (seen
		// under load: the next queued message was then sent and waited too).
		silent := parent.Err() == nil && (errors.Is(ctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded)
		if silent || dialFailed(err) {
			l.drop(conn)
		}
		if silent && len(ms) > 0 && forNamedSet(ms[0]) {
			// A named election's call that found no answer in time: its
			// peer is busy or unreachable, and a busy one was taken for
			// lost. Its messages are lost on the way instead, as on any
			// lossy link; the elections' timers decide about the peer (a
			// refused or reset call is still reported).
			for _, m := range ms {
				t.countFailed(m)
			}
			return false, silent
		}
		for _, m := range ms {
			if isHeartbeat(m) {
				l.fail(m, hbErr)
			} else {
				l.fail(m, err)
			}
		}
		return false, silent
	}
	for _, m := range ms {
		t.sent[m.Type].Add(1)
	}
	l.delivered.Store(true)
	return true, false
}
