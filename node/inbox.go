package node

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/electord/electord/election"
	"github.com/electord/electord/internal/fifo"
	"github.com/electord/electord/transport"
)

// Inbox is a node's receiving side: the transport.Receiver its transport
// and peer service deliver to. The node's loop takes from it what peers
// sent and which sends could not be delivered. It is built before both the
// transport (which needs a Receiver) and the node (which needs the
// transport), so nothing is bound late.
//
// It never blocks a caller: a full inbox refuses a message with
// transport.ErrOverloaded, so the sender learns at once that this node is
// alive but busy, and an inbox whose node is not serving peers (not yet
// running, killed, stopping, or unable to persist its term) refuses with
// transport.ErrNotServing. Messages are taken in the order they were
// queued. Its methods are safe for concurrent use; one Inbox feeds one node.
type Inbox struct {
	// msgs, named and failures are bounded queues whose memory follows
	// their length: as channels of 4,096 they held 1.2 MB of every node,
	// scanned by each GC cycle, for bursts an idle node never sees.
	//
	// msgs holds the default election's messages, named the named
	// elections' (namedMsg), apart: when the apps of a sharded service
	// start together, each peer sends a node one Candidacy per election,
	// 40,000 at once at 10,000 elections on five nodes. In one queue of
	// 4,096 most were refused as overloaded and sent again, and again,
	// until the start took 20 s instead of 2 (BenchmarkNamedStart); and
	// queued, they would hold the default election's heartbeats behind
	// them for a second.
	msgs, named *fifo.Queue[transport.Inbound]
	// namedBytes: the names and values the named queue holds, bounded by
	// namedInboxBytes, so a peer's flood of long values cannot make the
	// larger queue hold more memory than its count suggests.
	namedBytes atomic.Int64
	failures   *fifo.Queue[failure]
	// peerDown carries sends that failed with transport.ErrPeerDown: the
	// peer's process is gone (see peerGone).
	peerDown chan election.Message
	serving  atomic.Bool // the node answers peers (set by its loop)
	// refusing: the node refuses Elections (election.Status.RefusesElections,
	// set by its loop after every change).
	refusing atomic.Bool
	// refusingNamed: the named elections whose machine here refuses
	// Elections (a voter, in quorum mode; set by the loop, refuseNamed).
	// Empty in plain mode.
	refusingNamed sync.Map
	// counters are the node's; the inbox counts its refusals and the
	// failures it could not queue there.
	counters *Counters
}

var _ transport.Receiver = (*Inbox)(nil)

// NewInbox returns an inbox that queues up to size messages from peers of
// the default election, as many of the named elections, and as many send
// failures; size 0 takes the defaults (inboxSize, namedInboxSize).
func NewInbox(size int) *Inbox {
	named := size
	if size == 0 {
		named = namedInboxSize
	}
	size = inboxSize(size)
	return &Inbox{
		msgs:     fifo.New[transport.Inbound](size),
		named:    fifo.New[transport.Inbound](named),
		failures: fifo.New[failure](size),
		peerDown: make(chan election.Message, 16),
		counters: new(Counters),
	}
}

// Receive implements transport.Receiver; called by many goroutines.
func (b *Inbox) Receive(in transport.Inbound) error {
	if !b.serving.Load() {
		return transport.ErrNotServing
	}
	// Only the default election bootstraps: a named one starts when the
	// cluster has formed and apps campaign. A node's own ring round coming
	// back is taken: a leader that stopped standing runs one without itself
	// to hand over, and refused it would end only at its timeout.
	if in.Msg.Type == election.MsgElection && in.Msg.Initiator != in.Msg.To {
		if in.Msg.Election == "" && b.refusing.Load() {
			return transport.ErrNotReady
		}
		if in.Msg.Election != "" {
			// A voter refuses the election's Elections as a withdrawn node
			// refuses the default election's.
			if _, ok := b.refusingNamed.Load(in.Msg.Election); ok {
				return transport.ErrNotReady
			}
		}
	}
	if !namedMsg(in) {
		return b.queued(b.msgs.Push(in))
	}
	if asks(in.Msg.Type) && b.named.Len() >= b.msgs.Max() {
		// Past the default election's bound, a message that asks for an
		// answer is refused, as the shared inbox refused it before: behind
		// thousands of others it would be answered too late to count. An
		// Election's refusal tells the sender at once that this node is
		// alive and busy (the bully takes it for an answer); a heartbeat's
		// goes unanswered, as one lost. What informs (Candidacies,
		// announcements) queues: refused, it was sent again and again
		// while the burst lasted, and given up, lost (a quiet follower
		// held an old term of its leader for a quiet interval).
		return b.queued(false)
	}
	n := namedSize(in)
	if b.namedBytes.Add(n) <= namedInboxBytes && b.named.Push(in) {
		return nil
	}
	b.namedBytes.Add(-n)
	return b.queued(false)
}

// queued is Receive's answer for a message queued (ok) or not: a full
// inbox refuses it as overloaded, and counts it.
func (b *Inbox) queued(ok bool) error {
	if ok {
		return nil
	}
	b.counters.InboxFull.Add(1)
	return transport.ErrOverloaded
}

// asks: a message of type t asks its receiver for an answer in time.
func asks(t election.MsgType) bool { return t == election.MsgElection || t == election.MsgHeartbeat }

// namedSize is what namedBytes counts of in: its strings.
func namedSize(in transport.Inbound) int64 {
	return int64(len(in.Msg.Election) + len(in.Msg.Value))
}

// popNamed takes the oldest named election's message (on the loop).
func (b *Inbox) popNamed() (transport.Inbound, bool) {
	in, ok := b.named.Pop()
	if ok {
		b.namedBytes.Add(-namedSize(in))
	}
	return in, ok
}

// failure is a send the transport could not deliver, and why; busy: an
// Election a node above refused as overloaded (see Failed).
type failure struct {
	m    election.Message
	busy bool
	err  error
}

// event is f as the state machine observes it.
func (f failure) event() election.Event {
	typ := election.EventSendFailed
	if f.busy {
		typ = election.EventPeerBusy
	}
	return election.Event{Type: typ, Msg: f.m, Refused: errors.Is(f.err, transport.ErrPeerDown)}
}

// Failed implements transport.Receiver; called by many goroutines.
func (b *Inbox) Failed(m election.Message, err error) {
	// An Election refused by an overloaded node above (its inbox was full):
	// that node is alive and busy. For the bully that is its Answer, not its
	// death (EventPeerBusy): taken as a failure, it would let this node, a
	// lower one, win while the node above is announcing itself.
	busy := m.Type == election.MsgElection && transport.PeerOverloaded(err)
	if m.Election != "" && !busy && transport.PeerOverloaded(err) {
		// A named election's message refused by a live peer whose inbox was
		// full is back-pressure, not the peer's failure: taken as a lost
		// peer, a busy cluster churned itself busier. It is lost on the way;
		// the election's timers and the candidacies' resend recover it.
		b.counters.NamedBackpressure.Add(1)
		return
	}
	if errors.Is(err, transport.ErrPeerDown) {
		select {
		case b.peerDown <- m:
		default: // one report is enough; the heartbeat timeout covers the rest
		}
	}
	if !b.failures.Push(failure{m, busy, err}) {
		b.counters.FailuresLost.Add(1) // timeouts recover what this loses
	}
}

// drain drops every queued message, closing the reply channel of each
// Heartbeat so its server handler answers at once instead of waiting.
func (b *Inbox) drain() {
	for in, ok := b.msgs.Pop(); ok; in, ok = b.msgs.Pop() {
		if in.Reply != nil {
			close(in.Reply)
		}
	}
	for in, ok := b.popNamed(); ok; in, ok = b.popNamed() {
		if in.Reply != nil {
			close(in.Reply)
		}
	}
}

// refuseNamed sets whether the named election name refuses Elections.
func (b *Inbox) refuseNamed(name string, on bool) {
	if on {
		b.refusingNamed.Store(name, struct{}{})
	} else {
		b.refusingNamed.Delete(name)
	}
}
