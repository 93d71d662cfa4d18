// Package ring is the Chang-Roberts ring election, with the candidate list of
// the reference demo, as a pure election.Algorithm.
//
// The ring is the live members sorted by rank. An Election travels to each
// node's live successor and every node adds itself; when it returns to its
// initiator the highest rank wins (or the incumbent leader, without preempt),
// and the initiator announces the winner to every live member at once, one
// Coordinator each: a round costs one lap of n hops and one hop more, not
// two laps. Concurrent elections are suppressed: a node forwards only the
// election it would side with, the one with the newest epoch and then the
// highest initiator, so n initiators cost O(n) messages, not O(n²).
//
// Older nodes passed the Coordinator once around the ring instead (the lap
// announcement, marked by its Initiator). A node still passes such a
// Coordinator on, so a cluster in a rolling upgrade keeps electing; an
// older node, handed a direct Coordinator (no Initiator), takes it and
// passes it on to no one.
package ring

import (
	"fmt"

	"github.com/electord/electord/election"
)

// Name is the algorithm's name in configuration.
const Name = "ring"

// New returns a ring node.
func New(cfg election.Config) (election.StateMachine, error) {
	return election.New(cfg, &Ring{})
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

// Ring is the ring election procedure: an election.Algorithm, a
// CoordinatorObserver (it passes an older node's lap announcement on) and a
// MessageChecker.
//
// The ring alone uses these Message fields: Initiator, InitiatorRank,
// Candidates and MaxTerm (and Leader on an Election, the incumbent that
// forwarded it); and Config.HopTicks.
type Ring struct {
	active  bool          // taking part in an election
	current round         // the election taken part in
	own     bool          // this node initiated it
	term    election.Term // its term, when own
	elapsed int
	// lost counts this node's rounds in a row that timed out since a
	// leadership was last settled (see timeout).
	lost int
}

// Name implements election.Algorithm.
func (r *Ring) Name() string { return Name }

// Reset implements election.Algorithm.
func (r *Ring) Reset() { r.active, r.own, r.lost = false, false, 0 }

// timeout is how long a round may take: the election timeout and a hop
// allowance per member for the Election's lap, and one more for the
// announcement, which goes to every member at once; four times that in a
// cluster's first election (no leader ever known), and doubled for each
// round of this node's lost since a leadership was last settled, up to
// eight times. A cluster's first lap goes over connections still being
// opened, on hosts still starting processes: at 64 members and more its
// hops take several times their allowance, and a round that times out
// starts a new one at a newer epoch, which supersedes the lap still in
// flight, so without the room no lap ever finished. (An older initiator's
// lap announcement takes n hops more. Past the first election a hop takes
// a fraction of its allowance, so such a round still fits; one that does
// not is recovered as any lost round is.)
func (r *Ring) timeout(h election.Host) int {
	cfg := h.Config()
	lost := r.lost
	if h.Standing().LeaderTerm == 0 {
		lost += 2
	}
	return (cfg.ElectionTimeoutTicks + (len(h.Ring())+1)*cfg.HopTicks) << min(lost, 3)
}

var (
	_ election.CoordinatorObserver = (*Ring)(nil)
	_ election.MessageChecker      = (*Ring)(nil)
	_ election.SuspicionDelayer    = (*Ring)(nil)
	_ election.ElectionRefuser     = (*Ring)(nil)
)

// RefusesElectionsWhileBootstrapping implements election.ElectionRefuser:
// a node that is still bootstrapping (it has seen fewer members than BootstrapExpect) may
// not know its true successor and does not forward Elections (see Step).
// Refused, the sender skips it as it skips a dead successor, and the lap
// goes on at once; dropped, every lap would end here, and each initiator
// would wait out its round timeout (n+1 hops) and try again, for as long as
// this node's view stays short. The node misses the round as a candidate;
// it learns the winner from the Coordinator, which it does accept.
func (r *Ring) RefusesElectionsWhileBootstrapping() bool { return true }

// CheckMessage implements election.MessageChecker: an Election's initiator
// owns its term, and each candidate's rank is the one membership knows.
func (r *Ring) CheckMessage(h election.Host, m election.Message) string {
	if m.Type != election.MsgElection {
		return ""
	}
	if m.Initiator == 0 || !m.Term.OwnedBy(m.Initiator) {
		return fmt.Sprintf("initiator %d does not own term %v", m.Initiator, m.Term)
	}
	for _, c := range m.Candidates {
		if known, ok := h.RankOf(c.ID); ok && known != c {
			return fmt.Sprintf("candidate %d claims rank %v, membership says %v", c.ID, c, known)
		}
	}
	return ""
}

// Campaign implements election.Algorithm. A node that is taking part in
// another node's round does not start one of its own: that round elects
// the same winner, and a new one at a newer epoch would supersede it. If
// the round is lost, its timeout (Tick) starts a new one.
func (r *Ring) Campaign(h election.Host) {
	if r.active && !r.own {
		return
	}
	t := h.NewAttempt()
	self := h.Self()
	r.active, r.own, r.term, r.elapsed = true, true, t, 0
	r.current = round{epoch: t.Epoch(), initiator: self}
	st := h.Standing()
	m := election.Message{Type: election.MsgElection, Term: t, Initiator: self.ID, InitiatorRank: self, MaxTerm: st.Term}
	if !st.Excluded {
		m.Candidates = []election.Rank{self}
	}
	r.forward(h, m, self)
}

// forward sends m to the live successor of after; if that is this node, the
// message has come round.
func (r *Ring) forward(h election.Host, m election.Message, after election.Rank) {
	next := h.Successor(after)
	if next.ID == h.Self().ID {
		r.arrived(h, m)
		return
	}
	m.To, m.FromRank = next.ID, h.Self()
	h.Send(m)
}

// arrived handles an Election, or an older node's lap Coordinator, that
// reached this node with no one else to go to.
func (r *Ring) arrived(h election.Host, m election.Message) {
	if m.Type == election.MsgElection && m.Initiator == h.Self().ID {
		r.complete(h, m)
	}
	// Anything else has gone as far as it can; timeouts recover.
}

// Step implements election.Algorithm.
func (r *Ring) Step(h election.Host, m election.Message) {
	if m.Type != election.MsgElection {
		return // the ring has no Answer
	}
	self := h.Self()
	if m.Initiator == self.ID {
		if r.active && r.own && m.Term == r.term {
			r.complete(h, m)
		}
		return // an election of ours that was abandoned
	}
	if h.Bootstrapping() {
		// A first start that has not seen the whole cluster yet may not know
		// its true successor: forwarding could route the election past
		// members it has not heard of. Its node refuses such an Election
		// before it gets here (RefusesElectionsWhileBootstrapping), so the sender skips this
		// node; one that came in before the refusal began is dropped, and
		// its initiator's round timeout recovers.
		return
	}
	st := h.Standing()
	in := round{epoch: m.Term.Epoch(), initiator: m.InitiatorRank}
	if r.active && in.less(r.current) {
		return // suppressed: this node sides with a stronger election
	}
	if r.active && r.current == in {
		return // already forwarded (a duplicate)
	}
	if st.Role == election.RoleLeader && !h.Config().Preempt && !st.Excluded && m.Term > st.LeaderTerm {
		// An election started after this leadership reached the sitting
		// leader, which would win it anyway (sticky):
		// end it here and tell the initiator who leads, at the same term.
		// The initiator lost sight of this leader (it timed out,
		// restarted, or was cut off); its attempt's term is its own
		// business, since nodes report leadership terms only.
		h.Send(election.Message{Type: election.MsgCoordinator, To: m.Initiator, Term: st.LeaderTerm, Leader: self.ID, Confirmed: true})
		return
	}
	r.active, r.own, r.current, r.elapsed = true, false, in, 0
	if !st.Excluded {
		m.Candidates = append(append([]election.Rank(nil), m.Candidates...), self)
	} else if st.Withdrawn && h.Config().Majority() > 1 {
		// A member that does not stand (a named election's voter, which
		// the node lets through its inbox) is reachable all the same: the
		// majority below counts it, or a round over fewer candidates than
		// a majority could never elect, though a majority would acknowledge.
		m.Support++
	}
	if m.MaxTerm < st.Term {
		m.MaxTerm = st.Term
	}
	if st.Role == election.RoleLeader {
		m.Leader = self.ID // the incumbent marks itself
	}
	r.forward(h, m, self)
}

// complete picks the winner of an election that came round.
func (r *Ring) complete(h election.Host, m election.Message) {
	r.active, r.own = false, false
	cands := m.Candidates
	cfg := h.Config()
	if len(cands) == 0 || (cfg.Majority() > 0 && len(cands)+int(m.Support) < cfg.Majority()) {
		h.NoLeader() // too few reachable: try again later
		return
	}
	winner := cands[0]
	for _, cand := range cands[1:] {
		if winner.Less(cand) {
			winner = cand
		}
	}
	if m.Leader != 0 && !cfg.Preempt {
		for _, cand := range cands {
			if cand.ID == m.Leader {
				winner = cand // sticky: the incumbent stays
			}
		}
	}
	seen := max(m.MaxTerm, h.Standing().Term)
	t := election.NextTerm(seen, winner.ID)
	// The announcement has no Initiator: it goes to each member directly,
	// and no node, older ones included, passes it on (Coordinated).
	coord := election.Message{Type: election.MsgCoordinator, Term: t, Leader: winner.ID, Confirmed: true}
	h.Adopt(winner.ID, t)
	if cfg.Majority() > 1 {
		// Quorum mode: the winner leads only once a majority acknowledged
		// its own proposal, which goes to every member from it. If this
		// node won, it has proposed (Adopt), and that is the announcement.
		// Otherwise only the winner needs telling: any other member, told
		// by this node, would only ask the winner (hearsay) before its
		// proposal comes.
		if winner.ID != h.Self().ID {
			coord.To = winner.ID
			h.Send(coord)
		}
		return
	}
	h.Broadcast(coord)
}

// Coordinated implements election.CoordinatorObserver: pass an older
// node's accepted lap announcement (it names its Initiator) on around the
// ring, stopping before its initiator. A direct announcement (no Initiator)
// has reached every member already.
func (r *Ring) Coordinated(h election.Host, m election.Message, accepted bool) {
	self := h.Self()
	if !accepted || m.Initiator == 0 || m.Initiator == self.ID {
		return
	}
	next := h.Successor(self)
	if next.ID == m.Initiator || next.ID == self.ID {
		return
	}
	m.To, m.FromRank = next.ID, self
	h.Send(m)
}

// SuspicionDelay implements election.SuspicionDelayer: after losing its
// leader a node waits one tick for each live member that outranks it (the
// lost leader aside), at most a leader timeout, so when every node learns
// of a crash at once the highest survivor's round goes first and the others
// join it instead of each starting one (O(n) messages, not O(n^2)).
func (r *Ring) SuspicionDelay(h election.Host) int { return election.RankDelay(h) }

// TicksUntilDue implements election.TickDuer: the round's timeout.
func (r *Ring) TicksUntilDue(h election.Host) int {
	if !r.active {
		return 0
	}
	return max(1, r.timeout(h)-r.elapsed+1)
}

// SkipTicks implements election.TickSkipper: the round's count.
func (r *Ring) SkipTicks(k int) {
	if r.active {
		r.elapsed += k
	}
}

// Tick implements election.Algorithm.
func (r *Ring) Tick(h election.Host) {
	if !r.active {
		return
	}
	r.elapsed++
	if r.elapsed <= r.timeout(h) {
		return
	}
	r.active = false
	if r.own {
		r.lost++
	}
	st := h.Standing()
	if st.Role != election.RoleFollower && st.Role != election.RoleLeader && !st.Excluded && !h.Bootstrapping() {
		r.Campaign(h) // the round was lost: start a new one
	}
}

// SendFailed implements election.Algorithm: skip the dead successor. A
// Coordinator without an Initiator went to its receiver alone (a round's
// announcement goes to every member at once): there is no one to skip to.
func (r *Ring) SendFailed(h election.Host, m election.Message) {
	if m.Type != election.MsgElection && m.Type != election.MsgCoordinator {
		return
	}
	if m.Type == election.MsgCoordinator && m.Initiator == 0 {
		return
	}
	if m.Type == election.MsgElection && (!r.active || round{m.Term.Epoch(), m.InitiatorRank} != r.current) {
		return // no longer our election
	}
	// Skip the dead successor. If membership already removed it, this
	// node's own successor is the one after it.
	from := h.Self()
	if dead, ok := h.RankOf(m.To); ok {
		from = dead
	}
	next := h.Successor(from)
	if next.ID == m.To {
		next = h.Successor(next)
	}
	if m.Type == election.MsgCoordinator && next.ID == m.Initiator {
		return
	}
	if next.ID == h.Self().ID {
		r.arrived(h, m)
		return
	}
	m.To = next.ID
	h.Send(m)
}
