package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/electord/electord/election"
)

// do runs f on the loop and waits for it.
func (n *Node) do(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	select {
	case n.cmds <- func() { done <- f() }:
	case <-n.stopped:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-n.stopped:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Resign steps down; an election runs without this node.
func (n *Node) Resign(ctx context.Context) error {
	return n.do(ctx, func() error {
		if err := n.refuseCommand(); err != nil {
			return err
		}
		if err := n.preemptUndoes(0); err != nil {
			return err
		}
		return n.sm.Resign()
	})
}

// Transfer hands leadership to id.
func (n *Node) Transfer(ctx context.Context, id election.NodeID) error {
	return n.do(ctx, func() error {
		if err := n.refuseCommand(); err != nil {
			return err
		}
		if rec := n.members[id]; rec != nil && !rec.alive {
			return refusal{ErrNotAlive, fmt.Sprintf("transfer: node %d is a member but not alive (killed, stopped or cut off): it cannot lead now", id)}
		}
		if err := n.preemptUndoes(id); err != nil {
			return err
		}
		return n.sm.Transfer(id)
	})
}

// preemptUndoes refuses, when preempt is on and this node leads, a
// handover that preemption would undo at once: a Resign (to is 0) of the
// best-ranked live node, which takes leadership back, or a Transfer to a
// node that a live member (this one included) outranks, which deposes it.
func (n *Node) preemptUndoes(to election.NodeID) error {
	if !n.cfg.Preempt || n.sm.Status().Role != election.RoleLeader {
		return nil
	}
	self := n.cfg.Self
	best := election.Rank{Priority: self.Priority, ID: self.ID}
	for id, rec := range n.members {
		if r := (election.Rank{Priority: rec.Priority, ID: id}); rec.alive && id != to && best.Less(r) {
			best = r
		}
	}
	if to == 0 {
		if best.ID != self.ID {
			return nil
		}
		return refusal{ErrPreempted, fmt.Sprintf("resign refused: preempt is on and node %d outranks every live member, so it would take leadership back at once; "+
			"to move leadership, stop node %d (SIGTERM hands over) or give another node a higher priority", self.ID, self.ID)}
	}
	rec := n.members[to]
	if to == self.ID || rec == nil {
		return nil
	}
	if (election.Rank{Priority: rec.Priority, ID: to}).Less(best) {
		return refusal{ErrPreempted, fmt.Sprintf("transfer refused: preempt is on and node %d (priority %d) outranks node %d (priority %d), so it would depose node %d at once; "+
			"give node %d the highest priority, or run without preempt", best.ID, best.Priority, to, rec.Priority, to, to)}
	}
	return nil
}

// refusal is a command refused with a message of its own; it wraps kind.
type refusal struct {
	kind error
	msg  string
}

func (r refusal) Error() string { return r.msg }

func (r refusal) Unwrap() error { return r.kind }

// Handover prepares this node to stop (SIGTERM): from now on it never
// reports itself as the leader (Leader, /leader/self). If it leads, it
// transfers its leadership to the best-ranked live member (highest
// priority, then id) and waits, at most wait, until it sees another node
// lead, so the cluster is leaderless only for the transfer's round trip,
// then lingers one heartbeat interval so every follower hears of the new
// leader before this node leaves; it stops waiting early if the transfer
// message could not be delivered.
// It returns the member it handed over to, 0 if it did not lead or had no
// one to hand over to. A node that does not lead returns at once. The
// caller then stops the node (its Run's context).
func (n *Node) Handover(ctx context.Context, wait time.Duration) (election.NodeID, error) {
	sub := n.Subscribe()
	defer sub.Close()
	var to election.NodeID
	err := n.do(ctx, func() error {
		n.leaving, n.dirty = true, true
		if n.halted() || n.sm.Status().Role != election.RoleLeader {
			return nil
		}
		// The best-ranked live member that stands: a member whose
		// candidate probe fails refuses (election.ErrNotStanding), and the
		// next is tried.
		var alive []election.NodeID
		for id, rec := range n.members {
			if rec.alive {
				alive = append(alive, id)
			}
		}
		slices.SortFunc(alive, func(a, b election.NodeID) int {
			return cmp.Or(cmp.Compare(n.members[b].Priority, n.members[a].Priority), cmp.Compare(b, a))
		})
		for _, id := range alive {
			err := n.sm.Transfer(id)
			if errors.Is(err, election.ErrNotStanding) {
				continue
			}
			if err == nil {
				to, n.handingTo = id, id
			}
			return err
		}
		return nil
	})
	if err != nil || to == 0 {
		return to, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case li, ok := <-sub.C():
			if !ok {
				return to, ErrStopped
			}
			if li.ID != 0 && li.ID != n.cfg.Self.ID {
				// Linger one heartbeat interval, still answering peers: a
				// follower the new leader's announcement has not reached
				// yet learns of it from its next heartbeat's answer, and
				// does not campaign when this node leaves.
				linger := time.NewTimer(n.cfg.HeartbeatInterval + 2*n.cfg.Tick)
				defer linger.Stop()
				select {
				case <-linger.C:
				case <-ctx.Done():
				}
				return to, nil
			}
		case <-n.handoverLost:
			return to, fmt.Errorf("node: the handover to %d could not be delivered", to)
		case <-timer.C:
			return to, fmt.Errorf("node: handed over to %d, but no new leader was seen within %v", to, wait)
		case <-ctx.Done():
			return to, ctx.Err()
		}
	}
}

// Kill makes the node crash-stop as far as its peers can tell: it stops
// answering them, stops its state machine and leaves gossip. The process
// and its persisted term stay; its client API answers Unavailable except to
// Kill and Revive (see api), so clients move on to another endpoint.
func (n *Node) Kill(ctx context.Context) error {
	return n.do(ctx, func() error {
		n.kill(true)
		return nil
	})
}

// kill stops the node as its peers see it. leave says whether to leave
// gossip cleanly (announcing it) or just stop gossiping.
func (n *Node) kill(leave bool) {
	if n.killed {
		return
	}
	n.killed, n.dirty = true, true
	n.in.serving.Store(false)
	n.withdraw() // before the leave, which can take seconds
	n.stopNamed()
	if leave {
		n.leaveGossip()
	} else if n.mem != nil {
		if err := n.mem.Shutdown(); err != nil {
			n.log.Warn("stopping gossip", "err", err)
		}
		n.mem, n.events = nil, nil
	}
	n.in.drain()
}

// Revive undoes Kill: the state machine restarts from the persisted term
// and the node joins gossip again.
func (n *Node) Revive(ctx context.Context) error {
	return n.do(ctx, func() error {
		if !n.killed {
			return nil
		}
		if err := n.startMachine(); err != nil {
			return err
		}
		for _, rec := range n.members {
			rec.alive = false
		}
		if err := n.joinGossip(); err != nil {
			return err
		}
		n.killed, n.dirty = false, true
		n.restartNamed() // its peers hear of it as gossip shows them this node again
		n.in.serving.Store(!n.halted())
		return nil
	})
}

// Exit terminates the process, if the node was given a way to.
func (n *Node) Exit() {
	if n.cfg.Exit != nil {
		n.cfg.Exit()
	}
}

func (n *Node) refuseCommand() error {
	switch {
	case n.killed:
		return ErrKilled
	case n.storeErr != nil:
		return fmt.Errorf("%w: %v", ErrNoStore, n.storeErr)
	}
	return nil
}
