package node

import (
	"context"
	"fmt"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
)

// TransferElection hands this node's leadership of the named election name
// to node to, which must stand in it: the leader's machine sends it one
// TimeoutNow, as a withdrawal's handover does, and to leads at a new term.
// This node's app stays a candidate (it follows to). Refused with
// ErrNotLeader when this node does not lead name, ErrNotCandidate when to
// does not stand in it (as far as this node has heard), ErrNotAlive when
// gossip says to is not alive, and ErrPreempted when preempt is on and a
// candidate outranks to in the election, which would depose it at once.
// A transfer to this node itself, while it leads, changes nothing.
func (n *Node) TransferElection(ctx context.Context, name string, to election.NodeID) error {
	if err := named.CheckName(name); err != nil {
		return err
	}
	return n.do(ctx, func() error {
		if err := n.refuseCommand(); err != nil {
			return err
		}
		nm := n.named.machines[name]
		if nm == nil || nm.sm.Status().Role != election.RoleLeader {
			return refusal{ErrNotLeader, fmt.Sprintf("transfer: node %d does not lead %s", n.cfg.Self.ID, name)}
		}
		if to == n.cfg.Self.ID {
			return nil
		}
		stand, ok := n.named.table.Get(name, to)
		if !ok {
			return refusal{ErrNotCandidate, fmt.Sprintf("transfer: node %d does not stand in %s (no app campaigns there through it)", to, name)}
		}
		if rec := n.members[to]; rec == nil || !rec.alive {
			return refusal{ErrNotAlive, fmt.Sprintf("transfer: node %d stands in %s but is not alive: it cannot lead now", to, name)}
		}
		if err := n.namedPreemptUndoes(name, to, stand.Priority); err != nil {
			return err
		}
		n.catchUpNamed()
		err := nm.sm.Transfer(to)
		n.named.touch(name)
		return err
	})
}

// namedPreemptUndoes refuses, when preempt is on, a transfer of name to a
// candidate that another live candidate (this node's included) outranks in
// that election: the sitting leader would be deposed by it at once. Ranks
// are the candidacies' priorities, then node ids, as the election's
// machines rank them.
func (n *Node) namedPreemptUndoes(name string, to election.NodeID, priority int64) error {
	if !n.cfg.Preempt {
		return nil
	}
	target := election.Rank{Priority: priority, ID: to}
	best := target
	if head, ok := n.named.queues.Head(name); ok {
		best = election.Rank{Priority: head.Priority, ID: n.cfg.Self.ID}
	}
	for _, m := range n.named.table.Members(name) {
		if r := (election.Rank{Priority: m.Priority, ID: m.ID}); m.ID != to && n.members[m.ID] != nil && n.members[m.ID].alive && best.Less(r) {
			best = r
		}
	}
	if target.Less(best) {
		return refusal{ErrPreempted, fmt.Sprintf("transfer refused: preempt is on and node %d (priority %d) outranks node %d (priority %d) in %s, so it would depose node %d at once",
			best.ID, best.Priority, to, priority, name, to)}
	}
	return nil
}
