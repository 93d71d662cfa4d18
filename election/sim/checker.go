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
//
// Liveness (L1) is checked by the caller with Sim.RunUntil and Sim.Agreed.
type Checker struct {
	s        *Sim
	leaderOf map[election.Term]election.NodeID // who led (or was believed to lead) each term
	lastTerm map[election.NodeID]election.Term
	shown    map[election.NodeID]election.Term // S3: the last leadership term reported
	err      error
	// Checks counts the node states examined.
	Checks int
}

func newChecker(s *Sim) *Checker {
	return &Checker{s: s, leaderOf: map[election.Term]election.NodeID{}, lastTerm: map[election.NodeID]election.Term{},
		shown: map[election.NodeID]election.Term{}}
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
		c.Checks++
		st := n.sm.Status()
		c.Term(n.id, st.Term)
		c.shownTerm(n.id, st.LeaderTerm)
		switch st.Role {
		case election.RoleLeader:
			if !st.LeaderTerm.OwnedBy(n.id) {
				c.fail("S1 violated: node %d leads term %v, which it does not own", n.id, st.LeaderTerm)
			}
			c.Claim(n.id, n.id, st.LeaderTerm)
			claiming = append(claiming, n.id)
		case election.RoleFollower:
			c.Claim(n.id, st.Leader, st.LeaderTerm)
		}
		if st.LeaderTerm > st.Term {
			c.fail("node %d believes in term %v above the highest it has seen, %v", n.id, st.LeaderTerm, st.Term)
		}
	}
	if c.s.opts.Quorum && len(claiming) > 1 {
		c.fail("Q1 violated: nodes %v all claim leadership at this tick in quorum mode", claiming)
	}
	return c.err
}
