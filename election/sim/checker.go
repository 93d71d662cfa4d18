package sim

import (
	"fmt"

	"github.com/electord/electord/election"
)

// Checker verifies the safety properties after every step:
//
//	S1: at most one leader per term. Every node that leads in term T is the
//	    same node, T is owned by it, and every follower that believes in a
//	    leader for T names that same node.
//	S2: a node's term never decreases, across restarts too.
//	S3: the leadership term a node reports (Status.LeaderTerm: the
//	    leadership it follows or leads, or the last one it knew when it
//	    knows none) never decreases, across restarts too. This is what a
//	    user sees as the node's term (/leader, electctl).
//	Q1: in quorum mode, never two nodes claiming leadership at the same
//	    tick (every node's clock runs at the same rate here; see
//	    docs/ALGORITHMS.md for the clock-rate bound on real machines).
//	Q2: in quorum mode, a node that has not been able to reach a majority
//	    of the cluster (both ways, itself included) for MinorityGrace ticks
//	    names no leader, unless it follows a leader it reaches both ways
//	    and that leader claims (a bridge's far side following the
//	    majority's leader, as a Raft follower would; Q1 makes that leader
//	    the only one): a bridged node must not name, by hearsay, a leader
//	    it cannot reach. Part of Q2: in quorum mode a node takes up a
//	    leader only on a message from that leader (FollowedSecondHand),
//	    never on another node's word.
//
// Liveness (L1) is checked by the caller with Sim.RunUntil and Sim.Agreed.
type Checker struct {
	s        *Sim
	leaderOf map[election.Term]election.NodeID // who led (or was believed to lead) each term
	lastTerm map[election.NodeID]election.Term
	shown    map[election.NodeID]election.Term // S3: the last leadership term reported
	minority map[election.NodeID]uint64        // Q2: since when a node has been unable to reach a majority
	okAt     map[election.NodeID]okAt          // Q2: when a node cut off was last fine, naming whom
	named    map[election.NodeID]okAt          // Q2: since when each node names the leader it names
	claimed  map[election.Term]bool            // Q2: every term some node led
	err      error
	// statusOf is the state Q2 judges a node by: its machine's (nil), or
	// one named election's (Named).
	statusOf func(*node) election.Status
	// Checks counts the node states examined.
	Checks int
}

func newChecker(s *Sim) *Checker {
	return &Checker{s: s, leaderOf: map[election.Term]election.NodeID{}, lastTerm: map[election.NodeID]election.Term{},
		shown: map[election.NodeID]election.Term{}, minority: map[election.NodeID]uint64{},
		okAt: map[election.NodeID]okAt{}, named: map[election.NodeID]okAt{},
		claimed: map[election.Term]bool{}}
}

func (c *Checker) fail(format string, a ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("tick %d: "+format, append([]any{c.s.now}, a...)...)
	}
}

// Claim records that node says leader leads term t; a different claim for
// the same term is an S1 violation. Exported so tests can prove the checker
// catches one.
func (c *Checker) Claim(node election.NodeID, leader election.NodeID, t election.Term) {
	if prev, ok := c.leaderOf[t]; ok && prev != leader {
		c.fail("S1 violated: node %d says %d leads term %v, but %d was leader of it", node, leader, t, prev)
		return
	}
	c.leaderOf[t] = leader
}

// Term records a node's term; a decrease is an S2 violation.
func (c *Checker) Term(node election.NodeID, t election.Term) {
	if t < c.lastTerm[node] {
		c.fail("S2 violated: node %d went from term %v back to %v", node, c.lastTerm[node], t)
		return
	}
	c.lastTerm[node] = t
}

func (c *Checker) persist(n *node, t election.Term) { c.Term(n.id, t) }

func (c *Checker) crashed(*node) {}

func (c *Checker) restarted(n *node) {
	st := n.sm.Status()
	c.Term(n.id, st.Term)
	c.shownTerm(n.id, st.LeaderTerm)
}

// shownTerm records the leadership term a node reports; a decrease is an
// S3 violation.
func (c *Checker) shownTerm(node election.NodeID, t election.Term) {
	if t < c.shown[node] {
		c.fail("S3 violated: node %d reported leadership term %v, then %v", node, c.shown[node], t)
		return
	}
	c.shown[node] = t
}

// Err is the first violation seen, if any.
func (c *Checker) Err() error { return c.err }

func (c *Checker) check() error {
	var claiming []election.NodeID
	for _, n := range c.s.nodes {
		if !n.up {
			continue
		}
		if c.status(n.id, n.sm.Status()) {
			claiming = append(claiming, n.id)
		}
	}
	if c.s.opts.Quorum {
		// Q2: a follower names only a leadership its leader claimed.
		for _, n := range c.s.nodes {
			if !n.up {
				continue
			}
			if st := n.sm.Status(); st.Role == election.RoleFollower && !c.claimed[st.LeaderTerm] {
				c.fail("Q2 violated: node %d follows node %d at term %v, which no node led", n.id, st.Leader, st.LeaderTerm)
			}
		}
	}
	if c.s.opts.Quorum && len(claiming) > 1 {
		c.fail("Q1 violated: nodes %v all claim leadership at this tick in quorum mode", claiming)
	}
	if c.s.opts.Quorum {
		c.checkMinority()
	}
	return c.err
}

// status checks S1, S2 and S3 on one node's state and says whether the
// node claims leadership.
func (c *Checker) status(id election.NodeID, st election.Status) (leads bool) {
	c.Checks++
	c.Term(id, st.Term)
	c.shownTerm(id, st.LeaderTerm)
	switch st.Role {
	case election.RoleLeader:
		if !st.LeaderTerm.OwnedBy(id) {
			c.fail("S1 violated: node %d leads term %v, which it does not own", id, st.LeaderTerm)
		}
		c.Claim(id, id, st.LeaderTerm)
		c.claimed[st.LeaderTerm] = true
		leads = true
	case election.RoleFollower:
		c.Claim(id, st.Leader, st.LeaderTerm)
	}
	if st.LeaderTerm > st.Term {
		c.fail("node %d believes in term %v above the highest it has seen, %v", id, st.LeaderTerm, st.Term)
	}
	return leads
}

// MinorityGrace is Q2's grace in ticks: a node cut off from the majority
// may go on naming its leader until its lease or heartbeat timeout (with
// jitter) and the leader's release have run their course.
func (c *Checker) MinorityGrace() uint64 {
	cfg := c.s.nodes[0].cfg.Defaults()
	return uint64(2*cfg.LeaderTimeoutTicks + cfg.JitterTicks)
}

// reach counts the up nodes n can talk with both ways, itself included.
func (c *Checker) reach(n *node) int {
	k := 1
	for _, o := range c.s.nodes {
		if o != n && o.up && c.s.linked(n.id, o.id) && c.s.linked(o.id, n.id) {
			k++
		}
	}
	return k
}

// stat is n's state as Q2 judges it.
func (c *Checker) stat(n *node) election.Status {
	if c.statusOf != nil {
		return c.statusOf(n)
	}
	return n.sm.Status()
}

func (c *Checker) checkMinority() {
	need := len(c.s.nodes)/2 + 1
	for _, n := range c.s.nodes {
		st := c.stat(n)
		if named, ok := c.named[n.id]; !ok || named.leader != st.Leader || !n.up {
			c.named[n.id] = okAt{tick: c.s.now, leader: st.Leader}
		}
		if !n.up || c.reach(n) >= need {
			delete(c.minority, n.id)
			delete(c.okAt, n.id)
			continue
		}
		if _, ok := c.minority[n.id]; !ok {
			c.minority[n.id] = c.s.now
		}
		// Fine: naming no leader, or following a leader it reaches both ways
		// while that leader claims (a bridge's far side; a leader cut off
		// with it, until its lease ends and it says so).
		fine := st.Leader == 0
		if st.Leader > 0 && int(st.Leader) <= len(c.s.nodes) && st.Leader != n.id {
			l := c.s.nodes[st.Leader-1]
			linked := c.s.linked(n.id, l.id) && c.s.linked(l.id, n.id)
			fine = fine || (st.Role == election.RoleFollower && l.up && linked && c.stat(l).Role == election.RoleLeader)
		}
		if fine {
			c.okAt[n.id] = okAt{tick: c.s.now, leader: st.Leader}
			continue
		}
		// The grace runs from the cut, from when it took this leader up (on
		// the leader's own word: see FollowedSecondHand), or from when it
		// stopped being fine with this leader (the leader went away or
		// stopped claiming: the release or its own timeout is on the way),
		// whichever is last.
		since := max(c.minority[n.id], c.named[n.id].tick)
		if ok, seen := c.okAt[n.id]; seen && ok.leader == st.Leader {
			since = max(since, ok.tick+1)
		}
		if c.s.now-since > c.MinorityGrace() {
			c.fail("Q2 violated: node %d, unable to reach a majority since tick %d, names node %d leader (%v, term %v) since tick %d",
				n.id, c.minority[n.id], st.Leader, st.Role, st.LeaderTerm, since)
		}
	}
}

// okAt is the last tick a node cut off from the majority was fine (Q2), and
// the leader it named then.
type okAt struct {
	tick   uint64
	leader election.NodeID
}

// FollowedSecondHand records a node that took up a new leadership (leader,
// or term) on a message from another node than that leader: in quorum mode
// a Q2 violation.
func (c *Checker) followedSecondHand(n *node, before, after election.Status, m election.Message) {
	if after.Role != election.RoleFollower || (after.Leader == before.Leader && after.LeaderTerm == before.LeaderTerm && before.Role == election.RoleFollower) {
		return
	}
	if m.From != after.Leader {
		c.fail("Q2 violated: node %d took up node %d as leader (term %v) on a %v from node %d, not on the leader's own word",
			n.id, after.Leader, after.LeaderTerm, m.Type, m.From)
	}
}
