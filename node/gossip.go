package node

import (
	"fmt"
	"time"

	"github.com/electord/electord/election"
)

func (n *Node) membershipEvent(ev MemberEvent) {
	id := ev.Member.ID
	if id == n.cfg.Self.ID && ev.Type != MemberConflict {
		return
	}
	switch ev.Type {
	case MemberJoin, MemberUpdate:
		rec := n.members[id]
		if rec == nil {
			rec = &memberRec{}
			n.members[id] = rec
		}
		if !rec.alive {
			n.revivals++
			rec.aliveAt = n.revivals
		}
		rec.Meta, rec.alive = ev.Member, true
		n.cfg.Transport.SetPeer(id, ev.Member.PeerAddr)
		if !n.halted() {
			n.sm.Observe(election.Event{Type: election.EventJoin, Member: election.Member{ID: id, Priority: ev.Member.Priority}})
		}
	case MemberLeave, MemberDead:
		if rec := n.members[id]; rec != nil {
			rec.alive = false
		}
		typ := election.EventDead
		if ev.Type == MemberLeave {
			typ = election.EventLeave
		}
		if !n.halted() {
			n.sm.Observe(election.Event{Type: typ, Member: election.Member{ID: id}})
		}
	case MemberConflict:
		n.counters.Conflicts.Add(1)
		n.log.Error("membership conflict: the node is not let in", "id", uint64(id), "detail", ev.Detail)
		if ev.Yield && !n.killed {
			// This node lost its id or term slot to another claimant (it could
			// mint terms that belong to the other node), or its cluster
			// settings differ from the cluster it meets (it would lead a
			// cluster of one). Stand down until an operator revives it.
			n.log.Error("standing down: fix this node's --id or cluster settings (algorithm, quorum, preempt), then restart it or electctl revive", "detail", ev.Detail)
			// No Leave: gossip matches a leave by name, so leaving would
			// declare the other node, the one gossip admitted, gone.
			n.kill(false)
		}
	}
	n.dirty = true
}

func (n *Node) joinGossip() error {
	mem, err := n.cfg.NewMembership()
	if err != nil {
		return fmt.Errorf("gossip: %w", err)
	}
	n.mem, n.events = mem, mem.Events()
	_, reports := mem.(SyncReporter)
	n.gossipSynced = !reports
	return nil
}

func (n *Node) leaveGossip() {
	if n.mem == nil {
		return
	}
	if err := n.mem.Leave(2 * time.Second); err != nil {
		n.log.Warn("leaving gossip", "err", err)
	}
	if err := n.mem.Shutdown(); err != nil {
		n.log.Warn("stopping gossip", "err", err)
	}
	n.mem, n.events = nil, nil
}
