package node

import (
	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
)

// How a node learns the other nodes' candidacies in the named elections and
// tells them its own: the Candidacy messages, their incarnations, and who
// is answered.

// candidacyFrom records a peer's standing in a named election. A candidacy
// is taken from any sender: the transport has bound the sender's identity,
// and gossip may not have shown this node the sender yet (its Join, when it
// comes, makes this node send its own candidacies back).
//
// A candidacy from a later incarnation of the sender voids what this node
// holds of its earlier one, in every election: that process is gone (so is
// any leadership it held), and the new one knows none of this node's
// candidacies. Gossip does not say so when the process restarted before it
// was declared dead: the node is alive throughout, no Leave, no Join. So
// this node answers a new incarnation as it answers a Join: with all of its
// candidacies.
func (n *Node) candidacyFrom(m election.Message) {
	renewal, voided := n.named.table.Renew(m.From, m.Incarnation)
	if renewal == named.Stale {
		n.log.Debug("named election: ignored a candidacy from a peer's earlier process", "peer", uint64(m.From), "election", m.Election)
		return
	}
	if renewal == named.Restarted {
		n.forgetPair(m.From) // a new process: vouched for after a timeout of its own
	}
	if len(voided) > 0 {
		n.named.rebalanceStale()
	}
	for _, name := range voided {
		if nm := n.named.machines[name]; nm != nil && !n.halted() {
			n.catchUpNamed()
			// The earlier process is gone for certain: in plain mode a
			// leave, which ends the following of a leader heard a moment
			// ago (a death verdict keeps a fresh leader). A quorum's
			// machine counts the member's promises: a death, as gossip's.
			gone := election.EventLeave
			if n.namedQuorum() {
				gone = election.EventDead
			}
			nm.sm.Observe(election.Event{Type: gone, Member: election.Member{ID: m.From}})
			if rec := n.members[m.From]; n.namedQuorum() && rec != nil && rec.alive {
				// The new process is a live member, a voter at least.
				nm.sm.Observe(election.Event{Type: election.EventJoin, Member: election.Member{ID: m.From}})
			}
		}
		n.named.touch(name)
		n.followVoters(name)
	}
	if renewal == named.Restarted && !n.halted() {
		n.log.Info("named elections: a peer restarted; its earlier candidacies are void", "peer", uint64(m.From), "elections", len(voided))
		for _, name := range n.named.queues.Elections() {
			n.sendCandidacy(name, m.From)
		}
	}
	name := m.Election
	if name == "" {
		n.heldDigestFrom(m) // the sender's incarnation (announceIncarnation), and what it holds of this node's
		return
	}
	// After the incarnation: a copy from a new process is news even when
	// its standing reads the same.
	if !n.followsWithdrawn(m) && n.unchangedCandidacy(m) {
		return
	}
	n.named.rebalanceStale()
	nm := n.named.machines[name]
	if m.Confirmed {
		was, had := n.named.table.Get(name, m.From)
		joined, reranked := n.named.table.Set(name, m.From, standOf(m))
		if joined && !n.halted() {
			n.startNamedClock() // its periods vouch for what it holds (stopIdleNamedClock)
		}
		if nm == nil && n.namedQuorum() {
			n.followVoters(name) // a voter's machine, the sender a member of it
		} else if nm != nil && (joined || reranked) && !n.halted() {
			n.catchUpNamed()
			nm.sm.Observe(election.Event{Type: election.EventJoin, Member: election.Member{ID: m.From, Priority: m.FromRank.Priority}})
		}
		if joined && n.standsIn(name) && renewal != named.Restarted && !n.toldStanding(name, m.From) {
			// A candidate new to this node may not know this node stands
			// either (this node's last word went out before it was a live
			// member here): tell it. The answer is not new to it, so this
			// ends there. One told already is not answered: when the
			// candidates of an election stand together, each would
			// otherwise send its candidacy twice to each other.
			n.sendCandidacy(name, m.From)
		}
		if nm != nil && had && !reranked && was.Value == m.Value {
			// Only the sender's leadership changed (its term, its start):
			// this node shows name as its machine sees it, beside the same
			// candidates and the same value of theirs, so there is nothing
			// to publish, and no machine was called. A new leader says so
			// to every member in each of its elections: in a mass failover
			// this was a quarter of a follower's publishes.
			return
		}
	} else if withdrew := n.named.table.Withdraw(name, m.From); (withdrew || n.followsWithdrawn(m)) && nm != nil && !n.halted() {
		if n.namedQuorum() {
			// The sender stays a member (a voter now); its machine says so
			// in its heartbeats. Nobody left standing: the voter goes.
			n.followVoters(name)
			if nm := n.named.machines[name]; nm != nil {
				// ... ranked now as a voter, at 0, as it ranks itself.
				n.catchUpNamed()
				nm.sm.Observe(election.Event{Type: election.EventJoin, Member: election.Member{ID: m.From}})
			}
		} else {
			n.catchUpNamed()
			nm.sm.Observe(election.Event{Type: election.EventLeave, Member: election.Member{ID: m.From}})
		}
	}
	n.named.touch(name)
}

// followsWithdrawn: m withdraws a node that name's machine follows although
// the table holds no candidacy of it (a death verdict dropped it while the
// machine kept its fresh leader, election/observe.go). Plain mode: a
// quorum's withdrawn leader stands down itself, and stays a voter. The
// machine is told all the same, or a quiet follower would follow it for
// as long as its node runs.
func (n *Node) followsWithdrawn(m election.Message) bool {
	nm := n.named.machines[m.Election]
	if m.Confirmed || nm == nil || n.namedQuorum() {
		return false
	}
	st := nm.sm.Status()
	return st.Role == election.RoleFollower && st.Leader == m.From
}

// sendCandidacy tells peer (every live member when 0) this node's standing
// in name.
func (n *Node) sendCandidacy(name string, peer election.NodeID) {
	if nm := n.named.machines[name]; nm != nil && peer == 0 {
		nm.told = n.revivals
	}
	n.sendToMembers(n.standingIn(name), peer)
}

// toldStanding: peer was a live member when this node last told every
// live member its standing in name.
func (n *Node) toldStanding(name string, peer election.NodeID) bool {
	nm, rec := n.named.machines[name], n.members[peer]
	return nm != nil && nm.told != 0 && rec != nil && rec.alive && rec.aliveAt <= nm.told
}

// standingIn is the Candidacy by which this node says its standing in
// name: the head of its queue there, and the leadership it holds, or a
// withdrawal.
func (n *Node) standingIn(name string) election.Message {
	m := n.notStanding(name)
	if head, ok := n.named.queues.Head(name); ok {
		n.headStanding(&m, head, n.named.machines[name])
	}
	return m
}

// headStanding fills in m, a Candidacy, the standing of head, the head of
// m's election's queue, whose machine is nm (nil: none runs).
func (n *Node) headStanding(m *election.Message, head named.Candidacy, nm *namedMachine) {
	s := headStand(head, nm)
	m.Confirmed, m.Value = true, s.Value
	m.FromRank = election.Rank{Priority: s.Priority, ID: n.cfg.Self.ID}
	m.Term, m.LeaderSince = s.LeaderTerm, s.LeaderSince
}

// headStand is the standing of head, the head of an election's queue whose
// machine is nm (nil: none runs): what this node's Candidacy in it says,
// as peers record it (standOf).
func headStand(head named.Candidacy, nm *namedMachine) named.Stand {
	s := named.Stand{Priority: head.Priority, Value: head.Value}
	if nm != nil && nm.reported.Role == election.RoleLeader {
		s.LeaderTerm, s.LeaderSince = nm.reported.Term, nm.since.UnixNano()
	}
	return s
}

// announceIncarnation tells peer (every live member when 0) this node's
// incarnation, in a Candidacy of no election. A node meets every member at
// its start (gossip's Join), so a node restarted faster than gossip noticed
// is known as new by everyone at once, before any app of it stands, even
// when it stands in nothing: each that knew its earlier process answers
// with all of its candidacies (candidacyFrom).
func (n *Node) announceIncarnation(peer election.NodeID) {
	if !n.halted() {
		n.sendToMembers(n.notStanding(""), peer)
	}
}

// notStanding is the Candidacy by which this node says it does not stand
// in name: a withdrawal; in no election (name ""), only its incarnation.
func (n *Node) notStanding(name string) election.Message {
	return election.Message{Type: election.MsgCandidacy, From: n.cfg.Self.ID, Election: name, Incarnation: n.named.incarnation}
}

// sendToMembers sends m to peer, or to every live member when peer is 0.
func (n *Node) sendToMembers(m election.Message, peer election.NodeID) {
	for id, rec := range n.members {
		if (peer == 0 || id == peer) && rec.alive {
			m.To = id
			n.cfg.Transport.Send(m)
		}
	}
}
