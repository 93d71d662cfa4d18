package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/election"
)

// Defaults for a Network.
const (
	DefaultCutDelay = 50 * time.Millisecond
)

// Network is an in-memory network for tests: the twin of GRPC plus
// PeerService. Nodes join it with a Receiver and get a Transport. Messages
// go through the wire codec (Encode, then Decode with the receiver's checks),
// are delivered asynchronously and keep their order per (sender, receiver)
// pair, and fail with the gRPC status codes the real transport would report:
//
//   - receiver unknown, Down, or closed: codes.Unavailable ("connection refused"), at once;
//   - link Cut: codes.DeadlineExceeded, after the cut delay;
//   - invalid on the wire: codes.InvalidArgument;
//   - receiver returns ErrNotServing: codes.Unavailable; ErrOverloaded: codes.ResourceExhausted;
//     ErrNotReady: codes.FailedPrecondition;
//   - Heartbeat not answered within the send timeout: codes.DeadlineExceeded.
//
// A Heartbeat's reply is handed to the sender's Receiver like GRPC does.
//
// All methods of Network are safe for concurrent use, including while
// messages are in flight; a fault set by one call applies to every message
// examined after it returns (a message already past the check is not
// recalled).
type Network struct {
	mu          sync.RWMutex
	nodes       map[election.NodeID]*Memory
	down        map[election.NodeID]bool
	crashed     map[election.NodeID]error // what a send to it fails with
	cuts        map[[2]election.NodeID]bool
	hook        func(election.Message) bool
	cutDelay    time.Duration
	sendTimeout time.Duration
	queueLen    int
}

// NewNetwork returns an empty network with a cut delay of DefaultCutDelay, a
// heartbeat send timeout of DefaultSendTimeout and per-peer queues of
// DefaultQueueLen. Safe for concurrent use.
func NewNetwork() *Network {
	return &Network{
		nodes:       make(map[election.NodeID]*Memory),
		down:        make(map[election.NodeID]bool),
		crashed:     make(map[election.NodeID]error),
		cuts:        make(map[[2]election.NodeID]bool),
		cutDelay:    DefaultCutDelay,
		sendTimeout: DefaultSendTimeout,
		queueLen:    DefaultQueueLen,
	}
}

// Join attaches node id with its Receiver and returns its transport. If id
// had already joined, the new transport replaces the old one as the
// destination of messages to id (the old one can still send until closed).
// Safe for concurrent use.
func (n *Network) Join(id election.NodeID, r Receiver) *Memory {
	t := &Memory{net: n, self: id, recv: r}
	n.mu.Lock()
	t.q = newSendQueues(r, n.queueLen, func(election.NodeID, string) link { return memLink{t} }, nil)
	n.nodes[id] = t
	n.mu.Unlock()
	return t
}

// Down makes sends to id fail like a refused connection (codes.Unavailable)
// until Up(id). id's own sends are not affected. Safe for concurrent use.
func (n *Network) Down(id election.NodeID) {
	n.mu.Lock()
	n.down[id] = true
	n.mu.Unlock()
}

// Crash makes id's process gone as its peers see a SIGKILL over gRPC: what
// id sends is dropped, sends to it fail with ErrPeerDown (a refused
// connection confirmed by a refused dial), and every other node is told at
// once, as a dropped connection is reported (a Heartbeat to id failed with
// ErrPeerDown). Until Up(id). Safe for concurrent use.
func (n *Network) Crash(id election.NodeID) {
	err := fmt.Errorf("%w: transport(memory): %d crashed: %w", ErrPeerDown, id,
		status.Errorf(codes.Unavailable, "connection refused by %d", id))
	n.mu.Lock()
	n.crashed[id] = err
	var others []*Memory
	for oid, t := range n.nodes {
		if oid != id {
			others = append(others, t)
		}
	}
	n.mu.Unlock()
	for _, t := range others {
		t.q.report(election.Message{Type: election.MsgHeartbeat, From: t.self, To: id}, err)
	}
}

// Up undoes Down(id) and Crash(id). Safe for concurrent use.
func (n *Network) Up(id election.NodeID) {
	n.mu.Lock()
	delete(n.down, id)
	delete(n.crashed, id)
	n.mu.Unlock()
}

// Cut breaks the link between a and b in both directions: a message between
// them fails with codes.DeadlineExceeded after the cut delay, like an RPC
// into a partition. It holds up the messages behind it on that pair, as a
// real RPC would. Safe for concurrent use.
func (n *Network) Cut(a, b election.NodeID) {
	n.mu.Lock()
	n.cuts[pair(a, b)] = true
	n.mu.Unlock()
}

// Heal restores every cut link. Safe for concurrent use.
func (n *Network) Heal() {
	n.mu.Lock()
	clear(n.cuts)
	n.mu.Unlock()
}

// SetHook installs fn (nil removes it). fn sees every message before its
// delivery is attempted; returning false drops the message silently: no
// delivery and no Failed call, like a loss no RPC would report. fn is called
// from delivery goroutines, concurrently for different pairs, and must be
// safe for that and must not call back into the Network or its transports'
// Send synchronously. Safe for concurrent use.
func (n *Network) SetHook(fn func(m election.Message) bool) {
	n.mu.Lock()
	n.hook = fn
	n.mu.Unlock()
}

// SetCutDelay sets how long a message on a cut link takes to fail. Safe for
// concurrent use.
func (n *Network) SetCutDelay(d time.Duration) {
	n.mu.Lock()
	n.cutDelay = d
	n.mu.Unlock()
}

// SetSendTimeout sets how long a Heartbeat waits for its reply. Safe for
// concurrent use.
func (n *Network) SetSendTimeout(d time.Duration) {
	n.mu.Lock()
	n.sendTimeout = d
	n.mu.Unlock()
}

func pair(a, b election.NodeID) [2]election.NodeID {
	if a > b {
		a, b = b, a
	}
	return [2]election.NodeID{a, b}
}

// Memory is one node's Transport on a Network. Like GRPC, with the same
// per-peer send queues, it needs SetPeer before it sends to a peer (the
// address is not used: messages are routed by id), sends each peer's
// messages in order from a bounded queue served by one goroutine, and calls
// its Receiver's methods only from its goroutines. All methods are safe for
// concurrent use.
type Memory struct {
	net  *Network
	self election.NodeID
	recv Receiver
	q    *sendQueues
}

var _ Transport = (*Memory)(nil)

// memLink carries one peer's messages over the Network, routed by id.
type memLink struct{ t *Memory }

func (memLink) setAddr(string) {} // messages are routed by id
func (memLink) close()         {}

func (l memLink) send(ctx context.Context, m election.Message) bool {
	l.t.deliver(ctx, m)
	return false // the in-memory twin keeps every queued message's own attempt
}

// sendHeartbeats implements heartbeatsLink as the Heartbeats call does:
// every Heartbeat is delivered before any answer is awaited, so the
// receiving node takes them in one loop pass.
func (l memLink) sendHeartbeats(ctx context.Context, ms []election.Message) bool {
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() { l.t.deliver(ctx, m) })
	}
	wg.Wait()
	return false
}

// Send queues m for m.To and returns at once; failures come back through
// Receiver.Failed from another goroutine (see Network for the errors). After
// Close, m is dropped without a Failed call. Safe for concurrent use.
func (t *Memory) Send(m election.Message) { t.q.send(m) }

// SetPeer records id as a peer and starts its delivery goroutine; the
// address is not used (messages are routed by id). Ignored after Close.
// Safe for concurrent use.
func (t *Memory) SetPeer(id election.NodeID, addr string) { t.q.setPeer(id, addr) }

// RemovePeer forgets id; messages still queued for it are reported with
// ErrUnknownPeer. Safe for concurrent use.
func (t *Memory) RemovePeer(id election.NodeID) { t.q.removePeer(id) }

// Close detaches the node from the network (sends to it now fail like a
// refused connection), stops its goroutines and waits for them. Queued
// messages are dropped without a Failed call. Safe to call more than once.
func (t *Memory) Close() error {
	t.net.mu.Lock()
	if t.net.nodes[t.self] == t {
		delete(t.net.nodes, t.self)
	}
	t.net.mu.Unlock()
	t.q.close()
	return nil
}

// deliver carries one message like an RPC would and reports the outcome.
func (t *Memory) deliver(ctx context.Context, m election.Message) {
	n := t.net
	n.mu.RLock()
	hook, dst, down, cut := n.hook, n.nodes[m.To], n.down[m.To], n.cuts[pair(t.self, m.To)]
	crashed, gone := n.crashed[t.self] != nil, n.crashed[m.To]
	cutDelay, timeout := n.cutDelay, n.sendTimeout
	n.mu.RUnlock()

	if crashed || hook != nil && !hook(m) {
		return
	}
	switch {
	case gone != nil:
		t.recv.Failed(m, gone)
		return
	case cut:
		timer := time.NewTimer(cutDelay)
		defer timer.Stop()
		select {
		case <-timer.C:
			t.recv.Failed(m, status.Error(codes.DeadlineExceeded, "transport(memory): link cut"))
		case <-ctx.Done():
			t.canceled(m)
		}
		return
	case dst == nil || down:
		t.recv.Failed(m, status.Errorf(codes.Unavailable, "transport(memory): connection refused by %d", m.To))
		return
	}

	x, err := Encode(m)
	var in election.Message
	if err == nil {
		in, err = Decode(x, dst.self)
	}
	if err != nil {
		code := codes.InvalidArgument
		if !errors.Is(err, ErrInvalidMessage) {
			code = codes.Internal
		}
		t.recv.Failed(m, status.Error(code, err.Error()))
		return
	}

	var reply chan election.Message
	if in.Type == election.MsgHeartbeat {
		reply = make(chan election.Message, 1)
	}
	if err := dst.recv.Receive(Inbound{Msg: in, Reply: reply}); err != nil {
		if reply == nil && retriesBusy(m) && errors.Is(err, ErrOverloaded) {
			t.q.busy(m.To, []election.Message{m}) // as the Batch call's refusal is
			return
		}
		code := codes.Internal
		switch {
		case errors.Is(err, ErrNotServing):
			code = codes.Unavailable
		case errors.Is(err, ErrOverloaded):
			code = codes.ResourceExhausted
		case errors.Is(err, ErrNotReady):
			code = codes.FailedPrecondition
		}
		t.recv.Failed(m, status.Error(code, err.Error()))
		return
	}
	if reply == nil {
		return
	}

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var r election.Message
	select {
	case got, ok := <-reply:
		if !ok {
			t.recv.Failed(m, status.Error(codes.Aborted, "transport(memory): node gave no heartbeat reply"))
			return
		}
		r = got
	case <-timer.C:
		t.recv.Failed(m, status.Error(codes.DeadlineExceeded, "transport(memory): heartbeat reply timed out"))
		return
	case <-ctx.Done():
		t.canceled(m)
		return
	}
	if r.Type != election.MsgHeartbeatResp {
		t.recv.Failed(m, status.Errorf(codes.Internal, "transport(memory): node answered a heartbeat with %v", r.Type))
		return
	}
	if x, err = Encode(r); err == nil {
		r, err = Decode(x, t.self)
	}
	if err != nil {
		return // the GRPC transport drops an invalid reply too
	}
	_ = t.recv.Receive(Inbound{Msg: r})
}

// canceled reports m, in flight when its peer was removed, like a canceled
// RPC; after Close nothing is reported.
func (t *Memory) canceled(m election.Message) {
	if !t.q.isClosed() {
		t.recv.Failed(m, status.Error(codes.Canceled, "transport(memory): peer removed"))
	}
}
