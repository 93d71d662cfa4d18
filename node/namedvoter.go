package node

import (
	"github.com/electord/electord/election"
	"github.com/electord/electord/election/algorithms"
)

// Quorum mode for named elections: the voter role (docs/ELECTIONS.md,
// "Quorum mode: voters"). `--quorum` counts the cluster's nodes, so in
// quorum mode every node runs a machine for every named election that has
// a live candidate anywhere (its own or a peer's), over every live member
// of the cluster, with the cluster's quorum. A node with no local candidacy
// runs it not standing (election.StateMachine.Stand(false)): the core's
// withdrawn node is exactly the voter (it stays a member, follows and
// heartbeats the leader, acknowledges proposals and keeps its promises,
// never campaigns, never wins, passes on a leadership handed to it). Plain
// mode keeps its machines for candidates only, over the candidates only:
// nothing here runs there.

// namedQuorum reports whether named elections run in quorum mode.
func (n *Node) namedQuorum() bool { return n.cfg.Quorum > 1 }

// namedWanted reports whether this node must run a machine for name: it
// stands in it, or (quorum mode) a peer does.
func (n *Node) namedWanted(name string) bool {
	if _, ok := n.named.queues.Head(name); ok {
		return true
	}
	return n.namedQuorum() && len(n.named.table.Members(name)) > 0
}

// machinePeers are the members a new machine for name starts with: in
// plain mode the election's candidates; in quorum mode every live member
// of the cluster, and every candidate (gossip may not show one yet), each
// ranked by its candidacy's priority in name (0 for a voter).
func (n *Node) machinePeers(name string) []election.Member {
	cands := n.named.table.Members(name)
	if !n.namedQuorum() {
		return cands
	}
	out := make([]election.Member, 0, len(n.members))
	in := map[election.NodeID]bool{}
	for _, m := range cands {
		out = append(out, m)
		in[m.ID] = true
	}
	for id, rec := range n.members {
		if rec.alive && id != n.cfg.Self.ID && !in[id] {
			out = append(out, election.Member{ID: id})
		}
	}
	return out
}

// followVoters (quorum mode) makes name's machine, as this node's own
// standing and its table say it must be: started (a voter when no app of
// this node stands), stood or withdrawn, or dropped when nobody stands
// anywhere. It is called after every change of the local queue or the
// table of name.
func (n *Node) followVoters(name string) {
	if !n.namedQuorum() || n.halted() {
		return
	}
	nm := n.named.machines[name]
	head, standing := n.named.queues.Head(name)
	switch {
	case nm == nil && n.namedWanted(name):
		if err := n.newMachine(name, head, machineStart{}); err != nil {
			n.log.Error("named election: cannot vote in it", "election", name, "err", err)
		}
	case nm != nil && !n.namedWanted(name):
		// Nobody stands anywhere: the voter goes, and the election's record
		// is folded into the floor. A machine started for it later holds
		// off for a promise's length (its term is not 0), so a promise this
		// one gave is kept across the drop.
		n.dropMachine(name)
		n.named.store.Drop(name)
		if err := n.named.store.Flush(); err != nil {
			n.log.Warn("named election: cannot drop a finished election's record", "election", name, "err", err)
		}
	case nm != nil && standing && nm.priority != head.Priority:
		// The core's rank of itself is fixed at its start: an app that
		// stands with another priority than the machine's gets a machine of
		// its own. Started from the persisted term, it holds off for a
		// promise's length as a restarted node does, so the promises of the
		// machine it replaces are kept.
		n.dropMachine(name)
		if err := n.newMachine(name, head, machineStart{}); err != nil {
			n.log.Error("named election: cannot stand in it", "election", name, "err", err)
		}
	case nm != nil && !standing && nm.priority != 0:
		// A voter ranks at 0 on every node: the others rank a member they
		// learn of as a voter at 0 and re-rank one that withdraws at 0
		// (candidacyFrom), and the core refuses the messages of a member
		// whose own rank differs from the one it holds (a ring round it
		// passes on would die there). Its rank is fixed at its start, so a
		// node whose app withdrew gets a voter's machine of its own, which
		// holds off for a promise's length, as above.
		n.dropMachine(name)
		if err := n.newMachine(name, head, machineStart{}); err != nil {
			n.log.Error("named election: cannot vote in it", "election", name, "err", err)
		}
	case nm != nil:
		n.catchUpNamed()
		nm.sm.Stand(standing)
		n.named.touch(name)
	}
}

// leadsNamed (quorum mode) reports whether this node leads any named
// election; while it does, the named clock applies every tick the loop
// missed (tickClock.catchAll), as the default election's clock does while
// it leads. One clock ticks every named machine, and it is due as soon as
// the earliest of them is (a voter's or follower's heartbeat, every
// interval), so without it a loop resumed from a pause (SIGSTOP) or
// starved would drop the ticks it missed: a leader's lease, counted in
// ticks from promises taken before the pause, would run on as if no time
// had passed, and the lease's end by the wall clock (namedInfo:
// tickWall plus the ticks left) would be published later than the
// promises it counts, which its voters may already have given another.
// Applied, the missed ticks end that lease at once. The cost: after such a
// pause this node's other machines see the missed ticks too, so a
// follower among them suspects its leader before reading what waits for
// it (its promises end no later than they would: safe).
func (n *Node) leadsNamed() bool {
	for _, nm := range n.named.machines {
		if nm.reported.Role == election.RoleLeader {
			return true
		}
	}
	return false
}

// voterMemberEvent (quorum mode) gives every named machine a cluster
// member's join, leave or death, as the default election gets them: a
// voter is a member of every election, not only of those it stands in.
func (n *Node) voterMemberEvent(typ election.EventType, id election.NodeID) {
	for name, nm := range n.named.machines {
		m := election.Member{ID: id}
		if s, ok := n.named.table.Get(name, id); ok && typ == election.EventJoin {
			m.Priority = s.Priority
		}
		n.catchUpNamed()
		nm.sm.Observe(election.Event{Type: typ, Member: m})
		n.named.touch(name)
	}
}

// refusesNamedElections tells the inbox which named elections refuse
// Elections (their machine does not stand: a voter), after a loop pass
// touched them, so a bully campaign skips a voter and a ring lap passes it
// by at once, as the default election's inbox does for a withdrawn node.
func (n *Node) refusesNamedElections(name string) {
	if !n.namedQuorum() {
		return
	}
	nm := n.named.machines[name]
	refuse := nm != nil && !n.halted() && nm.sm.Status().RefusesElections
	if refuse && nm.sm.Status().Withdrawn && algorithms.VotersForward(n.cfg.Algorithm) {
		refuse = false // the ring's voter forwards the round, counted in it
	}
	n.in.refuseNamed(name, refuse)
}

// standsIn reports whether this node stands in name: an app of it is at the
// head of the election's queue and its machine runs. (In plain mode every
// machine stands; in quorum mode a voter's does not.)
func (n *Node) standsIn(name string) bool {
	_, queued := n.named.queues.Head(name)
	return queued && n.named.machines[name] != nil
}
