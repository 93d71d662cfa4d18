package node

import (
	"time"

	"github.com/electord/electord/election"
)

// leaseHeld reports whether this node may claim leadership now: always
// outside quorum mode; in quorum mode only before its lease's end by the
// wall clock, checked on every call.
func (n *Node) leaseHeld() bool {
	return n.cfg.Quorum == 0 || time.Now().UnixNano() < n.leaseUntil.Load()
}

// updateLease publishes, in quorum mode, the wall-clock end of this node's
// lease: the state machine's lease end in ticks, counted from when its
// clock's last tick fell due (never later than when the lease's ticks
// really began, so the estimate errs early).
func (n *Node) updateLease() {
	if n.cfg.Quorum == 0 {
		return
	}
	var until int64
	st := n.sm.Status()
	n.leading.Store(st.Role == election.RoleLeader)
	if st.Role == election.RoleLeader && st.LeaseEnd > st.Now && !n.halted() && !n.leaving {
		until = n.clock.tickWall().Add(time.Duration(st.LeaseEnd-st.Now) * n.cfg.Tick).UnixNano()
	}
	n.leaseUntil.Store(until)
}
