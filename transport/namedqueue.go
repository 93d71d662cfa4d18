package transport

import (
	"sync"

	"github.com/electord/electord/election"
)

// The named elections' side of a peer's send queue. A loop pass that moves
// hundreds of named elections queues a Candidacy, a Coordinator or a
// Heartbeat per election for each peer. In the default election's queue
// (one slot per message, DefaultQueueLen) they overflowed from about 200
// elections on five nodes; each overflow was reported to its election as a
// failed send, which the election took for a lost peer: another round, more
// messages, and the elections never settled. Here they wait in a set of
// their own instead, and the peer's goroutine takes all of it at once: what
// one or more loop passes queued leaves as one Batch (and one Heartbeats
// call), in calls of at most maxCall messages.
//
// A message that carries a state the peer only needs the latest of replaces
// the one still waiting for the same key (see supersedes): the set holds at
// most one such message per election and key however many passes queued it
// while the peer was busy, so a slow peer costs memory in proportion to the
// elections, not to the time. The set never reports a message as failed
// because it is full: a peer that is slow to take them is back-pressure,
// not a lost peer (see namedQueue.push). Only the call's own failure (the
// peer's host refuses, resets or does not answer) is reported, as for any
// message.

// maxCall bounds the messages of one Batch or Heartbeats call taken from
// the set: a receiver takes a call's messages into its inbox (4,096) at
// once, and four peers' calls fit there together.
const maxCall = 512

// DefaultNamedQueueLen bounds the messages waiting in a peer's named set
// (after superseded ones are dropped): far above what 10,000 elections
// queue in a pass (a Candidacy and a Coordinator each), small next to the
// state of as many elections.
const DefaultNamedQueueLen = 1 << 16

// superKey names the state a superseding message carries.
type superKey struct {
	election  string
	typ       election.MsgType
	term      election.Term
	leader    election.NodeID
	initiator election.NodeID
	digest    bool
}

// supersedes returns m's key and true if a later message from this node
// with the same key makes m useless to its peer:
//
//   - a Candidacy states the sender's whole standing in one election (its
//     value, rank, incarnation, leadership term): the latest is the
//     standing, and the receiver's anti-entropy already takes a copy as the
//     state, not as an event (a lost one is repaired the same way); one of
//     no election that carries a digest (Message.Held) says more than the
//     sender's incarnation alone, and only a later digest supersedes it;
//   - a Heartbeat for one election and term asks the same question again,
//     with the newest stamp (quorum mode) and standing: the answer to the
//     latest is the one the follower uses;
//   - a Coordinator for one election, term, leader and initiator announces
//     the same leadership again (a confirmed one after an unconfirmed one,
//     in quorum mode: the later says more).
//
// Elections, Answers, acks, notifications and hand-overs are events a
// receiver counts or answers each of: they are never superseded.
func supersedes(m election.Message) (superKey, bool) {
	switch m.Type {
	case election.MsgCandidacy:
		return superKey{election: m.Election, typ: m.Type, digest: m.Held != 0}, true
	case election.MsgHeartbeat:
		return superKey{election: m.Election, typ: m.Type, term: m.Term}, true
	case election.MsgCoordinator:
		return superKey{election: m.Election, typ: m.Type, term: m.Term, leader: m.Leader, initiator: m.Initiator}, true
	}
	return superKey{}, false
}

// namedSet is the messages of named elections (and Candidacies) waiting for
// one peer, in the order they were queued. Safe for concurrent use.
type namedSet struct {
	mu sync.Mutex
	// retry: messages the peer refused as overloaded, sent first at the
	// next take (pushBack).
	retry []election.Message
	msgs  []election.Message
	gone  []bool // gone[i]: msgs[i] was superseded
	// spare: the slice of a round taken and sent, given back (recycle) for
	// the next round to fill instead of growing its own from nothing: the
	// rounds' appends were more than a quarter of what a mass failover
	// allocated.
	spare []election.Message
	live  int
	at    map[superKey]int // the waiting message of each superseding key
	// atPeak: the most keys at has held since it was made. A Go map keeps
	// the room of its largest size after clear, so a set that once held
	// every election's Candidacy (a start, a failover) would keep that room
	// for good; take drops a map that is mostly empty room (shrinkAt).
	atPeak int
	max    int
	ready  chan struct{} // holds a token while msgs is not empty
}

func newNamedSet(max int) *namedSet {
	return &namedSet{max: max, ready: make(chan struct{}, 1)}
}

// forNamedSet says whether m waits in the named set: a named election's message
// or a Candidacy. The default election's messages keep the queue, the call
// per message and the order they always had.
func forNamedSet(m election.Message) bool {
	return m.Election != "" || m.Type == election.MsgCandidacy
}

// push queues m, replacing the message it supersedes. It returns false
// only when the set holds max messages none of which m supersedes; the
// caller then drops m as lost on the way (its election's timers and the
// candidacies' resend recover it), never as a failure of the peer.
func (s *namedSet) push(m election.Message) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, sup := supersedes(m)
	if i, ok := s.at[k]; sup && ok {
		// The earlier one is dropped and the later one queued at the end:
		// every message queued before the later one still goes before it,
		// as if the earlier had been lost on the way.
		s.gone[i] = true
		s.live--
	} else if s.live >= s.max {
		return false
	}
	if len(s.msgs) >= 2*s.max {
		s.compact()
	}
	if s.msgs == nil {
		s.msgs, s.spare = s.spare, nil
	}
	if sup {
		if s.at == nil {
			s.at = make(map[superKey]int)
		}
		s.at[k] = len(s.msgs)
		s.atPeak = max(s.atPeak, len(s.at))
	}
	s.msgs = append(s.msgs, m)
	s.gone = append(s.gone, false)
	s.live++
	if s.live == 1 {
		select {
		case s.ready <- struct{}{}:
		default:
		}
	}
	return true
}

// pushBack keeps ms, messages taken from the set that the peer refused as
// overloaded, for the next take: ahead of what was queued since, in the
// order refused (a call's, then the next call's). One whose key a message
// queued since holds is dropped at the take, that one superseding it. What
// does not fit under max is returned, lost.
func (s *namedSet) pushBack(ms []election.Message) (lost []election.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range ms {
		if s.live+len(s.retry) >= s.max {
			return ms[i:]
		}
		s.retry = append(s.retry, m)
	}
	if len(ms) > 0 {
		select {
		case s.ready <- struct{}{}:
		default:
		}
	}
	return nil
}

// compact drops the superseded messages' slots (a peer that takes nothing
// for long while the same keys are queued again and again).
func (s *namedSet) compact() {
	kept := s.msgs[:0]
	clear(s.at)
	for i, m := range s.msgs {
		if s.gone[i] {
			continue
		}
		if k, ok := supersedes(m); ok {
			s.at[k] = len(kept)
		}
		kept = append(kept, m)
	}
	clear(s.msgs[len(kept):])
	s.msgs, s.gone = kept, make([]bool, len(kept))
}

// take returns every waiting message, in order (those put back first,
// pushBack), and empties the set.
func (s *namedSet) take() []election.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.msgs[:0] // taken in place, unless refused messages go first
	if len(s.retry) > 0 {
		out = make([]election.Message, 0, len(s.retry)+s.live)
	}
	for _, m := range s.retry {
		if k, ok := supersedes(m); ok {
			if _, later := s.at[k]; later {
				continue // a later message of its key is queued
			}
		}
		out = append(out, m)
	}
	for i, m := range s.msgs {
		if !s.gone[i] {
			out = append(out, m)
		}
	}
	s.retry, s.msgs, s.live = nil, nil, 0
	if roomy(len(s.gone), cap(s.gone)) {
		s.gone = s.gone[:0]
	} else {
		s.gone = nil
	}
	s.shrinkAt()
	select {
	case <-s.ready:
	default:
	}
	return out
}

// recycle gives back ms, a slice take returned, once its messages are sent:
// the next round fills it. One much larger than its round (a mass
// failover's, then a beat's) is dropped, so what a set keeps follows the
// rounds, not the largest one since the peer was met.
func (s *namedSet) recycle(ms []election.Message) {
	if cap(ms) == 0 || !roomy(len(ms), cap(ms)) {
		return // an empty take leaves the spare as it is
	}
	clear(ms[:cap(ms)]) // the messages' strings are not kept alive
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spare = ms[:0]
}

// roomy says whether a slice of capacity c that held n in its last round
// is worth keeping for the next. At rest a round is a message or two (a
// digest, a beat's heartbeats), so what a peer's set keeps then is a few
// KB, not a failover's room.
func roomy(n, c int) bool { return c <= 4*n+64 }

// shrinkAt empties at for the next round. A round that used at least a
// quarter of the map's peak (a steady stream of heartbeats) keeps it and
// its room; one that used less drops it, and the next round grows a map
// of its own size: memory follows what a round queues, not the largest
// round since the peer was met.
func (s *namedSet) shrinkAt() {
	if len(s.at)*4 < s.atPeak {
		s.at, s.atPeak = nil, 0
		return
	}
	clear(s.at)
}

// len is how many messages wait.
func (s *namedSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live + len(s.retry)
}
