// Package ring is the Chang-Roberts ring election, with the candidate list of
// the reference demo, as a pure state machine on top of election.Core.
//
// The ring is the live members sorted by rank. An Election travels to each
// node's live successor and every node adds itself; when it returns to its
// initiator the highest rank wins (or the incumbent leader, without preempt),
// and a Coordinator goes once around. Concurrent elections are suppressed:
// a node forwards only the election it would side with, the one with the
// newest epoch and then the highest initiator, so n initiators cost O(n)
// messages, not O(n²).
package ring

import (
	"github.com/electord/electord/election"
)

// New returns a ring node.
func New(cfg election.Config) (*election.Core, error) {
	return election.NewCore(cfg, &Ring{})
}

// round identifies an election: newer epoch first, then higher initiator.
type round struct {
	epoch     uint64
	initiator election.Rank
}

func (a round) less(b round) bool {
	if a.epoch != b.epoch {
		return a.epoch < b.epoch
	}
	return a.initiator.Less(b.initiator)
}

// Ring is the ring election procedure (election.Algorithm).
type Ring struct {
	active  bool          // taking part in an election
	current round         // the election taken part in
	own     bool          // this node initiated it
	term    election.Term // its term, when own
	elapsed int
}

// Name implements election.Algorithm.
func (r *Ring) Name() string { return "ring" }

// Reset implements election.Algorithm.
func (r *Ring) Reset() { r.active, r.own = false, false }

func (r *Ring) timeout(c *election.Core) int {
	cfg := c.Config()
	return cfg.ElectionTimeoutTicks + 2*len(c.Ring())*cfg.HopTicks
}

// Campaign implements election.Algorithm.
func (r *Ring) Campaign(c *election.Core) {
	t := c.NewAttempt()
	r.active, r.own, r.term, r.elapsed = true, true, t, 0
	r.current = round{epoch: t.Epoch(), initiator: c.Self()}
	m := election.Message{Type: election.MsgElection, Term: t, Initiator: c.ID(), InitiatorRank: c.Self(), MaxTerm: c.Term()}
	if !c.Excluded() {
		m.Candidates = []election.Rank{c.Self()}
	}
	r.forward(c, m, c.Self())
}

// forward sends m to the live successor of after; if that is this node, the
// message has come round.
func (r *Ring) forward(c *election.Core, m election.Message, after election.Rank) {
	next := c.Successor(after)
	if next.ID == c.ID() {
		r.arrived(c, m)
		return
	}
	m.To, m.FromRank = next.ID, c.Self()
	c.Send(m)
}

// arrived handles an Election or Coordinator that reached this node with no
// one else to go to.
func (r *Ring) arrived(c *election.Core, m election.Message) {
	if m.Type == election.MsgElection && m.Initiator == c.ID() {
		r.complete(c, m)
	}
	// Anything else has gone as far as it can; timeouts recover.
}

// Step implements election.Algorithm.
func (r *Ring) Step(c *election.Core, m election.Message) {
	if m.Type != election.MsgElection {
		return // the ring has no Answer
	}
	if m.Initiator == c.ID() {
		if r.active && r.own && m.Term == r.term {
			r.complete(c, m)
		}
		return // an election of ours that was abandoned
	}
	if c.Bootstrapping() {
		// A first start that has not seen the whole cluster yet may not know
		// its true successor: forwarding could route the election past
		// members it has not heard of. Drop it; the initiator retries.
		return
	}
	in := round{epoch: m.Term.Epoch(), initiator: m.InitiatorRank}
	if r.active && in.less(r.current) {
		return // suppressed: this node sides with a stronger election
	}
	if r.active && r.current == in {
		return // already forwarded (a duplicate)
	}
	r.active, r.own, r.current, r.elapsed = true, false, in, 0
	if !c.Excluded() {
		m.Candidates = append(append([]election.Rank(nil), m.Candidates...), c.Self())
	}
	if m.MaxTerm < c.Term() {
		m.MaxTerm = c.Term()
	}
	if c.Role() == election.RoleLeader {
		m.Leader = c.ID() // the incumbent marks itself
	}
	r.forward(c, m, c.Self())
}

// complete picks the winner of an election that came round.
func (r *Ring) complete(c *election.Core, m election.Message) {
	r.active, r.own = false, false
	cands := m.Candidates
	if len(cands) == 0 || (c.Majority() > 0 && len(cands) < c.Majority()) {
		c.NoLeader() // too few reachable: try again later
		return
	}
	winner := cands[0]
	for _, cand := range cands[1:] {
		if winner.Less(cand) {
			winner = cand
		}
	}
	if m.Leader != 0 && !c.Config().Preempt {
		for _, cand := range cands {
			if cand.ID == m.Leader {
				winner = cand // sticky: the incumbent stays
			}
		}
	}
	seen := max(m.MaxTerm, c.Term())
	t := election.NextTerm(seen, winner.ID)
	coord := election.Message{Type: election.MsgCoordinator, Term: t, Leader: winner.ID, Initiator: c.ID(), Confirmed: true}
	if winner.ID == c.ID() {
		c.BecomeLeader(t)
	} else {
		c.Follow(winner.ID, t)
	}
	r.forward(c, coord, c.Self())
}

// Coordinated implements election.Algorithm: pass an accepted announcement on
// around the ring, stopping before its initiator.
func (r *Ring) Coordinated(c *election.Core, m election.Message, accepted bool) {
	if !accepted || m.Initiator == 0 || m.Initiator == c.ID() {
		return
	}
	next := c.Successor(c.Self())
	if next.ID == m.Initiator || next.ID == c.ID() {
		return
	}
	m.To, m.FromRank = next.ID, c.Self()
	c.Send(m)
}

// Tick implements election.Algorithm.
func (r *Ring) Tick(c *election.Core) {
	if !r.active {
		return
	}
	r.elapsed++
	if r.elapsed <= r.timeout(c) {
		return
	}
	r.active = false
	if c.Role() != election.RoleFollower && c.Role() != election.RoleLeader && !c.Excluded() && !c.Bootstrapping() {
		r.Campaign(c) // the round was lost: start a new one
	}
}

// SendFailed implements election.Algorithm: skip the dead successor.
func (r *Ring) SendFailed(c *election.Core, m election.Message) {
	if m.Type != election.MsgElection && m.Type != election.MsgCoordinator {
		return
	}
	if m.Type == election.MsgElection && (!r.active || round{m.Term.Epoch(), m.InitiatorRank} != r.current) {
		return // no longer our election
	}
	// Skip the dead successor. If membership already removed it, this
	// node's own successor is the one after it.
	from := c.Self()
	if dead, ok := c.RankOf(m.To); ok {
		from = dead
	}
	next := c.Successor(from)
	if next.ID == m.To {
		next = c.Successor(next)
	}
	if m.Type == election.MsgCoordinator && next.ID == m.Initiator {
		return
	}
	if next.ID == c.ID() {
		r.arrived(c, m)
		return
	}
	m.To = next.ID
	c.Send(m)
}
