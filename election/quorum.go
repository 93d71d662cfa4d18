package election

import "slices"

// quorum is the state of quorum mode (Config.Quorum gives a majority of
// two or more; see docs/ALGORITHMS.md, "Quorum mode"): the acknowledgements
// a proposal collects, the lease a leader holds on a majority's promises,
// and the promise a follower keeps. It owns the majority arithmetic and
// nothing else: it sends nothing and changes no role, so the core decides
// what each count means. A core in plain mode has none (core.q is nil).
//
// The lease rule: a leader counts member m towards its lease until
// support[m]+leaseTicks of its own clock, where support[m] is a tick before
// m promised not to support anyone else, and a follower keeps its promise
// for promiseTicks (longer than the lease, see Config.PromiseTicks). So a
// leader stops claiming before any promise it counted can have ended, and
// promises go to one node at a time: two leases cannot overlap.
type quorum struct {
	majority     int    // nodes a quorum needs, this one included (2 or more)
	leaseTicks   uint64 // Config.LeaseTicks
	promiseTicks uint64 // Config.PromiseTicks

	// Proposing: the term this node waits for acknowledgements on (0:
	// none), when the proposal went out, how many ticks it has waited, and
	// who acknowledged it.
	proposal    Term
	proposedAt  uint64
	proposalAge int
	acks        map[NodeID]bool

	// Leading: for each member, the tick of this node's clock from which
	// its promise counts (support[m] above).
	support map[NodeID]uint64

	// Following: the node this one promised its support to, until
	// promiseEnd, and the last stamp its leader sent, echoed in its next
	// heartbeat.
	promisedTo NodeID
	promiseEnd uint64
	lastStamp  uint64

	// deferred: the last proposal this node refused because of its promise
	// to deferredFor, received at deferredAt (see deferProposal).
	deferred    Message
	deferredFor NodeID
	deferredAt  uint64
}

// newQuorum is quorum mode's state for cfg (defaults filled in), or nil
// when cfg is not in quorum mode: a majority of one is this node alone, and
// needs no lease.
//
// A node that starts with a persisted term (a restart, or a revive) starts
// bound by a promise to no one for promiseTicks: it acknowledges no proposal
// and proposes nothing until then. Its promises lived in memory only, and
// one it gave before it stopped may still be counted by a leader's lease;
// that promise began before the stop, so it ends before this one does. A
// first start (no term) has promised nothing: an acknowledgement, and a
// leader's stamp, come only at a term, and a term is persisted before
// anything that depends on it is sent. Without a durable store (Volatile)
// no term proves a first start, so such a node always holds off.
func newQuorum(cfg Config) *quorum {
	if cfg.Majority() <= 1 {
		return nil
	}
	q := &quorum{
		majority:     cfg.Majority(),
		leaseTicks:   uint64(cfg.LeaseTicks),
		promiseTicks: uint64(cfg.PromiseTicks()),
		support:      map[NodeID]uint64{},
	}
	if cfg.Term != 0 || cfg.Volatile {
		q.promiseEnd = q.promiseTicks // the clock starts at 0
	}
	return q
}

// ---- proposing ----

// propose starts collecting acknowledgements for term t, proposed at now.
func (q *quorum) propose(t Term, now uint64) {
	q.proposal, q.proposalAge, q.proposedAt = t, 0, now
	q.acks = map[NodeID]bool{}
}

// proposing reports whether a proposal waits for acknowledgements.
func (q *quorum) proposing() bool { return q.proposal != 0 }

// dropProposal forgets the proposal: a leadership settled, or this node
// gave up on it.
func (q *quorum) dropProposal() { q.proposal, q.acks = 0, nil }

// ack records from's acknowledgement of the proposal at term t, and reports
// whether the proposal now has a majority (this node included). An
// acknowledgement of any other term is no answer to this proposal.
func (q *quorum) ack(from NodeID, t Term) bool {
	if q.proposal == 0 || t != q.proposal {
		return false
	}
	q.acks[from] = true
	return len(q.acks)+1 >= q.majority
}

// ageProposal counts one tick of waiting and reports whether the proposal
// has waited longer than timeout: with no majority by then, it failed.
func (q *quorum) ageProposal(timeout int) bool {
	if q.proposal == 0 {
		return false
	}
	q.proposalAge++
	return q.proposalAge > timeout
}

// proposalDue is how many ticks from now a pending proposal times out
// (see ageProposal).
func (q *quorum) proposalDue(timeout int) int { return timeout - q.proposalAge + 1 }

// ---- leading ----

// lead takes the proposal's acknowledgements as the start of the lease: each
// was sent after the proposal went out, and with it a promise. A new
// leadership (fresh) counts only those; a leader going on at a new term
// keeps the support it had.
func (q *quorum) lead(fresh bool, members int) {
	if fresh {
		q.support = make(map[NodeID]uint64, members)
	}
	for id := range q.acks {
		q.count(id, q.proposedAt)
	}
}

// count has member id's promise count from tick at, unless an earlier
// acknowledgement already counts from later.
func (q *quorum) count(id NodeID, at uint64) { q.support[id] = max(q.support[id], at) }

// renew takes a follower's heartbeat, which echoes stamp (the stamp this
// leader sent it, or 0), and returns the stamp to answer with: this leader's
// clock plus one. An echo dates the follower's promise, so it counts from
// then, but only an echo of a stamp this leadership gave (from leaseFrom
// on) and never one from the future.
func (q *quorum) renew(from NodeID, stamp, leaseFrom, now uint64) uint64 {
	if at := stamp - 1; stamp != 0 && at >= leaseFrom && at <= now {
		q.count(from, at)
	}
	return now + 1
}

// leaseEnd is the first tick at which fewer than a majority (this node
// included) can be counted towards the lease. Only live members count.
func (q *quorum) leaseEnd(members peers) uint64 {
	ends := make([]uint64, 0, len(q.support))
	for id, at := range q.support {
		if members.live(id) {
			ends = append(ends, at+q.leaseTicks)
		}
	}
	k := q.majority - 1 // members needed besides this node
	if len(ends) < k {
		return 0
	}
	slices.Sort(ends)
	return ends[len(ends)-k] // the k-th latest
}

// ---- following ----

// promised reports whether this node still keeps a promise at now.
func (q *quorum) promised(now uint64) bool { return now < q.promiseEnd }

// promise binds this node not to support anyone but to for promiseTicks
// from now.
func (q *quorum) promise(to NodeID, now uint64) {
	q.promisedTo, q.promiseEnd = to, now+q.promiseTicks
}

// release frees this node of its promise to from, which stepped down, and
// reports whether it was bound to from.
func (q *quorum) release(from NodeID) bool {
	if q.promisedTo != from {
		return false
	}
	q.promiseEnd = 0
	return true
}

// deferProposal keeps m, a proposal refused at now because of this node's
// promise to promisedTo: if that node's release comes while the proposer
// still waits for acknowledgements, the proposal is answered then.
func (q *quorum) deferProposal(m Message, now uint64) {
	q.deferred, q.deferredFor, q.deferredAt = m, q.promisedTo, now
}

// takeDeferred returns, and forgets, the proposal refused because of the
// promise to from, unless it came more than timeout ticks before now (its
// proposer gave it up by then, see ageProposal).
func (q *quorum) takeDeferred(from NodeID, now uint64, timeout int) (Message, bool) {
	m, ok := q.deferred, q.deferredFor == from && q.deferred.Type == MsgCoordinator && now-q.deferredAt <= uint64(timeout)
	if q.deferredFor == from {
		q.deferred, q.deferredFor = Message{}, 0
	}
	return m, ok
}
