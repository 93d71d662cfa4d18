package node

import (
	"maps"
	"slices"

	"github.com/electord/electord/election"
)

// Anti-entropy for candidacies (docs/ELECTIONS.md, "How nodes learn the
// candidates"). A Candidacy is sent once, when it changes; one that is lost
// (a full send queue, a failed send, a lossy link) would otherwise be
// repaired only by that candidacy's next change or a gossip join, and an
// election could stay split for good. So every resend period each node
// tells every live member, in one message, a digest of the member's
// candidacies as it holds them (named.Digest, in a Candidacy of no
// election: Message.Held). A member whose own digest of its standing
// differs resends, to that node only, its current standing in every
// election it stands in and its withdrawal from every election it withdrew
// from lately (withdrawnRounds): a round. A member that sent no digest
// lately (an older node, or one whose digests are lost) gets a round every
// period but this node's first. Every node that holds a candidacy sends
// digests, whether it stands or not (stopIdleNamedClock).
// A copy that changes nothing is a no-op at the receiver (unchangedCandidacy).
// The rounds run on the named elections' one clock: no timer or goroutine
// per election.

// resendHeartbeats: a round starts every this many heartbeat intervals (4 s
// at the default 200 ms). It is the simulator's ratio (Mends.ResendEvery: 20
// ticks at one heartbeat a tick), with which TestPropertyNamedElections
// holds; a lost copy is repaired within one period. The cost is one
// Candidacy per election and member per period, against a follower's 20
// heartbeats per election in the same time (docs/bench/resend.md).
const resendHeartbeats = 20

// resendBatch bounds the elections one loop pass resends; the rest of the
// round goes in the next passes, one tick apart. Each election is one
// message per member, so a pass adds at most a quarter of a peer's send
// queue (transport.DefaultQueueLen, 256): a round never fills a queue, and
// so never loses the heartbeats and candidacies it shares it with, however
// many elections the node stands in.
const resendBatch = 64

// withdrawnRounds: a withdrawal is kept for a round until this many
// periods have passed with every member alive, then forgotten, so that the node does not keep
// every name it ever stood in. A round while this node holds some member
// dead does not count: that member hears none of it, and it may still hold
// this node's candidacy (gossip's views are not symmetric), which only
// these copies correct. The simulator finds it: counting every round, a
// withdrawal made while a member was held dead outlived none of its copies
// and left that member naming a leader that had withdrawn
// (TestPropertyNamedElections with -named.elections=20, seed 43; counting
// only full rounds, one instead of three fails there too).
const withdrawnRounds = 3

// withdrawnMaxRounds bounds a withdrawal's life when rounds never reach
// every member (one is down for good): 225 rounds, 15 minutes at the
// defaults, so the withdrawals kept are those of the last 15 minutes.
const withdrawnMaxRounds = 225

// namedResend is the resend's state, owned by the loop.
type namedResend struct {
	every int  // ticks between periods; 0 until the named clock first starts
	left  int  // ticks until the next period
	due   bool // a period fell due; resendNamed runs it
	// round: the elections of the current round not yet resent, sorted;
	// to: the members it goes to.
	round []string
	to    []election.NodeID
	// want: the members a round is to go to next (their digest of this
	// node's candidacies differed, or they sent none lately); digesters:
	// the period in which each member's last digest (Message.Held) came,
	// since it joined.
	want      map[election.NodeID]bool
	digesters map[election.NodeID]uint64
	// period counts the periods.
	period uint64
	// withdrawn: elections this node withdrew from, and how long it still
	// resends each withdrawal.
	withdrawn map[string]withdrawal
	// resent counts the Candidacy copies rounds sent (one per election and
	// member); unchanged, the copies received that changed nothing;
	// digests, the digests received, and differed, those that differed
	// from this node's own.
	resent, unchanged, digests, differed uint64
}

// withdrawal counts down one withdrawal's resends: full, the rounds that
// must still reach every member; left, the rounds it is kept at most.
type withdrawal struct{ full, left int }

// withdrew records that the node no longer stands in name: its rounds
// resend the withdrawal for a while.
func (r *namedResend) withdrew(name string) {
	if r.withdrawn == nil {
		r.withdrawn = map[string]withdrawal{}
	}
	r.withdrawn[name] = withdrawal{full: withdrawnRounds, left: withdrawnMaxRounds}
}

// pending: something is left to resend, so the named clock must run on
// after the last machine stopped.
func (r *namedResend) pending() bool {
	return len(r.withdrawn) > 0 || len(r.round) > 0 || len(r.want) > 0
}

// resendingSet is what the named clock drives: the machines, and the count
// of ticks to the next round.
type resendingSet struct{ machineSet }

// namedTicker is what the named clock drives (newMachine).
func (n *Node) namedTicker() resendingSet {
	r := &n.named.resend
	if r.every == 0 {
		r.every = resendHeartbeats * ticks(n.cfg.HeartbeatInterval, n.cfg.Tick)
		r.left = r.every
	}
	if ps := &n.named.pairs; ps.every == 0 && !n.namedQuorum() {
		ps.every = ticks(n.cfg.HeartbeatInterval, n.cfg.Tick)
		ps.left = ps.every
	}
	return resendingSet{machineSet{n.named}}
}

func (s resendingSet) Tick() {
	// The beat's count first: a machine due on this tick counts its next due
	// tick by the next beat (pairBeats.onBeat).
	s.s.pairs.tick()
	s.machineSet.Tick()
	r := &s.s.resend
	if r.left--; r.left <= 0 {
		r.left, r.due = r.every, true
	}
}

// TicksUntilDue: the machines' earliest due tick, the next round's, or the
// next tick while a round is under way.
func (s resendingSet) TicksUntilDue() int {
	due := s.machineSet.TicksUntilDue()
	r := &s.s.resend
	k := r.left
	if len(r.round) > 0 || len(r.want) > 0 || r.due || s.s.pairs.due {
		k = 1
	}
	if ps := &s.s.pairs; ps.every > 0 && ps.left < k {
		k = ps.left
	}
	if due == 0 || k < due {
		due = k
	}
	return due
}

// resendNamed runs after each loop pass (afterNamed): when a period fell
// due, it counts the withdrawals down and sends every live member its
// digest; it starts a round for the members that want one, and resends up
// to resendBatch elections of the current round.
func (n *Node) resendNamed() {
	r := &n.named.resend
	if r.due && !n.halted() {
		r.due = false
		r.period++
		n.countWithdrawals()
		n.sendHeldDigests()
	}
	if n.halted() {
		r.round, r.to, r.due = nil, nil, false // a killed node says nothing; it stands again when revived
		clear(r.want)
	} else {
		if len(r.round) == 0 && len(r.want) > 0 {
			r.round, r.to = n.resendNames(), slices.Sorted(maps.Keys(r.want))
			clear(r.want)
		}
		k := min(len(r.round), resendBatch)
		for _, name := range r.round[:k] {
			n.resendOne(name)
		}
		r.round = r.round[k:]
	}
	if len(r.round) == 0 {
		r.round, r.to = nil, nil
	}
	n.stopIdleNamedClock()
}

// countWithdrawals counts the withdrawals kept for rounds down, once a
// period: one is forgotten after withdrawnRounds periods with every member
// alive, after withdrawnMaxRounds periods, or once the node stands in that
// election again.
func (n *Node) countWithdrawals() {
	r := &n.named.resend
	full := true
	for _, rec := range n.members {
		full = full && rec.alive
	}
	for name, w := range r.withdrawn {
		if n.standsIn(name) || w.full <= 0 || w.left <= 0 {
			delete(r.withdrawn, name)
			continue
		}
		if full {
			w.full--
		}
		w.left--
		r.withdrawn[name] = w
	}
}

// resendNames lists the elections a new round resends, sorted: those the
// node stands in and those it withdrew from lately. A voter's machine
// (quorum mode) stands for nothing: its node's standing there is a
// withdrawal, kept like any other.
func (n *Node) resendNames() []string {
	names := slices.Collect(maps.Keys(n.named.machines))
	names = slices.DeleteFunc(names, func(name string) bool { return !n.standsIn(name) })
	for name := range n.named.resend.withdrawn {
		if !n.standsIn(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// resendOne sends the node's current standing in name to the round's
// members that are alive. An election whose app is queued but whose machine
// stopped (its term could not be written) is skipped: the node withdrew
// from it (namedStoreFailed), and sendCandidacy would say it stands.
func (n *Node) resendOne(name string) {
	if _, queued := n.named.queues.Head(name); queued && n.named.machines[name] == nil {
		return
	}
	r := &n.named.resend
	for _, id := range r.to {
		if rec := n.members[id]; rec != nil && rec.alive {
			n.sendCandidacy(name, id)
			r.resent++
		}
	}
}

// unchangedCandidacy reports whether m says what this node's table already
// holds of its sender in that election, counting it: such a copy (most of a
// round's) is dropped before it sets anything, so it causes no event, no
// publication and no write.
func (n *Node) unchangedCandidacy(m election.Message) bool {
	s, ok := n.named.table.Get(m.Election, m.From)
	same := ok == m.Confirmed && (!ok || s == standOf(m))
	if same {
		n.named.resend.unchanged++
	}
	return same
}
