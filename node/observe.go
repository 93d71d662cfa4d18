package node

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/electord/electord/election"
)

// This file is what the node tells operators beyond its leadership: the
// last elections it took part in (Elections, for the status page), the
// counts and durations metrics export (ElectionCounts, SetObserver), and a
// probe through the loop for health checks (Probe). The loop pays a few
// comparisons per Ready for it, and reads the clock only when an election
// starts or ends, when a term is saved (an fsync anyway), and when a
// message from the leader it follows arrives.

// ElectionsKept is how many elections Elections returns at most.
const ElectionsKept = 32

// ElectionRecord is one election this node took part in: from the moment
// it began electing (its role became electing, or it took leadership
// without electing first) to the moment it knew a leader or gave up.
type ElectionRecord struct {
	Started, Ended time.Time       // Ended zero while running
	Cause          string          // what started it (the node's cause string)
	Term           election.Term   // the term it ended at
	Leader         election.NodeID // the leader it ended with (0: none)
	Won            bool            // this node won it
	Messages       uint64          // election messages this node sent during it
}

// Duration is how long the election took (0 while it runs).
func (r ElectionRecord) Duration() time.Duration {
	if r.Ended.IsZero() {
		return 0
	}
	return r.Ended.Sub(r.Started)
}

// Observer is told what the loop measures, as it happens. Its methods are
// called on the node's loop: they must be quick and must not block (a
// Prometheus histogram's Observe is fine).
type Observer interface {
	// ElectionEnded: an election this node took part in ended.
	ElectionEnded(ElectionRecord)
	// FailureDetected: this node, following a leader, found the leader
	// gone (a timeout, a refused connection, a failed send or gossip's
	// verdict) and stopped following it; d is the time since it last heard
	// from that leader.
	FailureDetected(d time.Duration)
	// TermSaved: a write of the term to the store took d; err is its
	// error. Saves that had nothing to write are not reported.
	TermSaved(d time.Duration, err error)
}

// ElectionCounts are the node's election totals since it started.
type ElectionCounts struct {
	Started, Won, Lost uint64 // Lost: ended with another leader or none
	// Detections counts the leader failures this node detected (see
	// Observer.FailureDetected).
	Detections uint64
}

// observe is the node's record keeping for this file. The fields under mu
// are read by other goroutines; the rest are owned by the loop.
type observe struct {
	observer atomic.Pointer[Observer]

	started, won, lost, detections atomic.Uint64
	refusals                       refusals

	elections lastN[ElectionRecord]

	// Owned by the loop.
	open        bool          // the newest of elections is running
	role        election.Role // the role at the last observed Ready
	leaderHeard time.Time     // when a message last came from the leader this node follows
}

// SetObserver installs o (nil: none). Safe to call while the node runs.
func (n *Node) SetObserver(o Observer) {
	if o == nil {
		n.obs.observer.Store(nil)
		return
	}
	n.obs.observer.Store(&o)
}

func (n *Node) observer() Observer {
	if p := n.obs.observer.Load(); p != nil {
		return *p
	}
	return nil
}

// Elections returns the last ElectionsKept elections this node took part
// in, oldest first; the last one may still run (Ended zero). Safe for
// concurrent use.
func (n *Node) Elections() []ElectionRecord {
	return n.obs.elections.list()
}

// ElectionCounts returns the election totals. Safe for concurrent use.
func (n *Node) ElectionCounts() ElectionCounts {
	o := &n.obs
	return ElectionCounts{Started: o.started.Load(), Won: o.won.Load(), Lost: o.lost.Load(), Detections: o.detections.Load()}
}

// heard notes a message from a peer; called by the loop for every one, so
// it reads the clock only for the leader's.
func (n *Node) heard(m election.Message) {
	if m.From != 0 && m.From == n.published.leader && n.published.role == election.RoleFollower {
		n.obs.leaderHeard = time.Now()
	}
}

// isElectionMsg: the messages an election costs (heartbeats are not).
func isElectionMsg(t election.MsgType) bool {
	return t != election.MsgHeartbeat && t != election.MsgHeartbeatResp
}

// observeReady follows elections through each Ready the loop processed
// (its messages sent): called once per Ready.
func (n *Node) observeReady(rd *election.Ready) {
	o := &n.obs
	st := n.sm.Status()
	role := st.Role
	if role == o.role && !o.open {
		return // the common case: a heartbeat sent or answered
	}
	if o.role == election.RoleFollower && role != election.RoleFollower {
		n.leaderLost()
	}
	if !o.open && (role == election.RoleElecting || (role == election.RoleLeader && o.role != election.RoleLeader)) {
		n.electionStarted()
	}
	if o.open {
		var sent uint64
		for _, m := range rd.Messages {
			if isElectionMsg(m.Type) {
				sent++
			}
		}
		if role != election.RoleElecting {
			n.electionEnded(st, sent)
		} else if sent > 0 {
			o.elections.updateLast(func(r *ElectionRecord) { r.Messages += sent })
		}
	}
	o.role = role
}

// leaderLost: this node stopped following its leader. Unless a peer's
// message or an operator's command made it (a new election announced, a
// transfer), it found the leader gone on its own: a timeout, a refused
// connection, a failed send or gossip's verdict.
func (n *Node) leaderLost() {
	o := &n.obs
	if n.cause.kind != "message" && n.cause.kind != "command" && !o.leaderHeard.IsZero() {
		o.detections.Add(1)
		if obs := n.observer(); obs != nil {
			obs.FailureDetected(time.Since(o.leaderHeard))
		}
	}
	o.leaderHeard = time.Time{}
}

func (n *Node) electionStarted() {
	o := &n.obs
	cause := n.cause.String()
	o.started.Add(1)
	o.elections.add(ElectionRecord{Started: time.Now(), Cause: cause})
	o.open = true
}

func (n *Node) electionEnded(st election.Status, sent uint64) {
	o := &n.obs
	o.open = false
	var rec ElectionRecord
	o.elections.updateLast(func(r *ElectionRecord) {
		r.Ended, r.Messages = time.Now(), r.Messages+sent
		if st.Role == election.RoleLeader || st.Role == election.RoleFollower {
			r.Leader, r.Term = st.Leader, st.LeaderTerm
		} else {
			r.Term = st.Term
		}
		r.Won = st.Role == election.RoleLeader
		rec = *r
	})
	if rec.Won {
		o.won.Add(1)
	} else {
		o.lost.Add(1)
	}
	if rec.Leader != 0 && !rec.Won {
		o.leaderHeard = rec.Ended // following from now on
	}
	if obs := n.observer(); obs != nil {
		obs.ElectionEnded(rec)
	}
}

// saveTerm writes the term to the store, timed for the observer. A save
// that wrote nothing (the term within the reserved epochs, or no data dir)
// is not reported.
func (n *Node) saveTerm(term, leaderTerm election.Term) error {
	obs := n.observer()
	if obs == nil {
		return n.cfg.Store.Save(term, leaderTerm)
	}
	writes, start := n.cfg.Store.Writes, time.Now()
	err := n.cfg.Store.Save(term, leaderTerm)
	if err != nil || n.cfg.Store.Writes != writes {
		obs.TermSaved(time.Since(start), err)
	}
	return err
}

// ProbeInfo is what the loop answered to Probe.
type ProbeInfo struct {
	// Killed: electctl kill stopped the node (or it stood down after a
	// membership conflict) until a revive.
	Killed bool
	// Gossip: the node's gossip runs (joined or trying to).
	Gossip bool
	// AliveMembers is how many other members gossip reports alive.
	AliveMembers int
	// Leader is the leader this node knows (0: none); Role its role.
	Leader election.NodeID
	Role   string
	// StoreErr is the last failed term write, nil once a write succeeded.
	StoreErr error
	// Durable is what the term store holds.
	Durable Persisted
}

// Probe asks the loop for its state and waits for the answer, so it also
// proves the loop runs: it fails with ctx's error if the loop does not
// answer in time, ErrStopped if it ended.
func (n *Node) Probe(ctx context.Context) (ProbeInfo, error) {
	var p ProbeInfo
	err := n.do(ctx, func() error {
		p = ProbeInfo{Killed: n.killed, Gossip: n.mem != nil, StoreErr: n.storeErr, Durable: n.cfg.Store.Durable()}
		for _, rec := range n.members {
			if rec.alive {
				p.AliveMembers++
			}
		}
		st := n.sm.Status()
		p.Role = roleState(st.Role)
		if !n.halted() {
			p.Leader = st.Leader
		}
		return nil
	})
	return p, err
}

// Reasons the node refuses a peer message that passed the peer port's
// checks (see RefusedMessages).
const (
	RefusedTermRange     = "term_out_of_range" // a term beyond what a correct cluster reaches
	RefusedNotMember     = "not_a_member"      // the sender, or the leader named, is not a live member
	RefusedNotFromLeader = "not_from_leader"   // a TimeoutNow from another node than the leader
	RefusedInvalid       = "invalid"           // any other validation failure
)

var refusalReasons = [...]string{RefusedTermRange, RefusedNotMember, RefusedNotFromLeader, RefusedInvalid}

// refusals counts messages the state machine rejected, by type and reason.
type refusals [election.LastMsgType + 1][len(refusalReasons)]atomic.Uint64

// refused counts a message the state machine rejected with err.
func (n *Node) refused(m election.Message, err error) {
	r := len(refusalReasons) - 1
	switch {
	case errors.Is(err, election.ErrTermRange):
		r = 0
	case errors.Is(err, election.ErrNotMember):
		r = 1
	case errors.Is(err, election.ErrNotLeaderMsg):
		r = 2
	}
	t := m.Type
	if !t.Valid() {
		t = 0
	}
	n.obs.refusals[t][r].Add(1)
}

// Refusal is a count of refused messages of one type for one reason.
type Refusal struct {
	Type   election.MsgType // 0: not a known type
	Reason string
	Count  uint64
}

// RefusedMessages lists the peer messages the state machine rejected, by
// type and reason (only those seen). Safe for concurrent use.
func (n *Node) RefusedMessages() []Refusal {
	var out []Refusal
	for t := range n.obs.refusals {
		for r, reason := range refusalReasons {
			if c := n.obs.refusals[t][r].Load(); c > 0 {
				out = append(out, Refusal{Type: election.MsgType(t), Reason: reason, Count: c})
			}
		}
	}
	return out
}
