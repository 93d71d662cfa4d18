package node

import (
	"time"

	"github.com/electord/electord/election"
)

// leaseView is the published leadership as this node may claim it now,
// and, when it claims leadership in quorum mode, the wall-clock end of the
// lease it claims under (Unix ns; 0 otherwise). Outside quorum mode there
// is no lease and the published leadership stands. In quorum mode a claim
// stands only before the lease's end by the wall clock, checked on every
// call: the loop may be paused or starved past it.
func (n *Node) leaseView() (LeaderInfo, int64) {
	n.mu.RLock()
	li := n.leader
	n.mu.RUnlock()
	if !li.Self || n.cfg.Quorum == 0 {
		return li, 0
	}
	if until := n.leaseUntil.Load(); time.Now().UnixNano() < until {
		return li, until
	}
	// The lease ran out by the wall clock, although the loop has not
	// stepped down yet. Claim nothing.
	return LeaderInfo{State: StateNoLeader, Term: li.Term}, 0
}

// updateLease publishes, in quorum mode, the wall-clock end of this node's
// lease: the state machine's lease end in ticks, counted from when its
// clock's last tick fell due (never later than when the lease's ticks
// really began, so the estimate errs early). It reports whether the end
// moved (a lease started, was renewed or ended), after which the loop
// announces.
func (n *Node) updateLease() bool {
	if n.cfg.Quorum == 0 {
		return false
	}
	var until int64
	st := n.sm.Status()
	n.leading.Store(st.Role == election.RoleLeader)
	if st.Role == election.RoleLeader && st.LeaseEnd > st.Now && !n.halted() && !n.leaving {
		until = n.clock.tickWall().Add(time.Duration(st.LeaseEnd-st.Now) * n.cfg.Tick).UnixNano()
	}
	return n.leaseUntil.Swap(until) != until
}
