package node

import (
	"time"

	"github.com/electord/electord/election"
)

// How the named elections follow the membership and the transport: a
// member that joins, leaves or dies (gossip), a send that failed, a peer
// whose host refuses connections.

// namedMemberEvent follows gossip: a member that joins hears of this node's
// incarnation and candidacies; one that leaves or dies loses its own.
func (n *Node) namedMemberEvent(ev MemberEvent) {
	id := ev.Member.ID
	n.named.rebalanceStale()
	switch ev.Type {
	case MemberJoin:
		delete(n.named.gone, id)
		n.announceIncarnation(id)
		for _, name := range n.named.queues.Elections() {
			n.sendCandidacy(name, id)
		}
		if n.namedQuorum() && !n.halted() {
			n.voterMemberEvent(election.EventJoin, id)
		}
	case MemberLeave, MemberDead:
		delete(n.named.gone, id) // no more sends, no more refusals
		n.forgetPair(id)
		typ := election.EventDead
		if ev.Type == MemberLeave {
			typ = election.EventLeave
		}
		if n.namedQuorum() {
			// Every machine has every member; those that have nobody left
			// standing go.
			if !n.halted() {
				n.voterMemberEvent(typ, id)
			}
			for _, name := range n.named.table.Forget(id) {
				n.named.touch(name)
				n.followVoters(name)
			}
			return
		}
		n.forgetCandidate(id, typ)
	}
}

// forgetCandidate (plain mode) drops every candidacy of id, which left or
// died (typ), and tells the machines of those elections.
func (n *Node) forgetCandidate(id election.NodeID, typ election.EventType) {
	for _, name := range n.named.table.Forget(id) {
		if nm := n.named.machines[name]; nm != nil && !n.halted() {
			n.catchUpNamed()
			nm.sm.Observe(election.Event{Type: typ, Member: election.Member{ID: id}})
		}
		n.named.touch(name)
	}
}

// namedSendFailed tells a named machine that one of its messages was not
// delivered (a Candidacy is no machine's).
func (n *Node) namedSendFailed(ev election.Event) {
	if ev.Msg.Type == election.MsgCandidacy {
		return
	}
	if nm := n.named.machines[ev.Msg.Election]; nm != nil && !n.halted() {
		n.catchUpNamed()
		nm.sm.Observe(ev)
		n.named.touch(ev.Msg.Election)
	}
}

// failoverPerElection is about what failing one election over costs a node
// when it fails over many at once (a peer that led them died): the highest
// surviving candidate takes that long per election to announce itself in
// them all, 2,000 in 150-200 ms on two cores where every survivor does the
// same (BenchmarkNamedMassFailover). A node ranked below it waits that
// much more before it campaigns (election.Event.Lead): campaigning
// sooner, it found the highest survivor too busy to answer its Elections
// in time and claimed beside it, in half the elections at 2,000, and its
// own campaign and the claims' resolution doubled the failover.
const failoverPerElection = 100 * time.Microsecond

// timeOutLeader tells the machines of the elections in names, which follow
// one leader now lost, to time it out together, with the lead their number
// calls for (failoverPerElection).
func (n *Node) timeOutLeader(names []string) {
	if len(names) == 0 {
		return
	}
	n.catchUpNamed()
	// Whole ticks: under a tick's worth, nothing changes.
	lead := int(time.Duration(len(names)) * failoverPerElection / n.cfg.Tick)
	for _, name := range names {
		n.named.machines[name].sm.Observe(election.Event{Type: election.EventLeaderTimeout, Lead: lead})
		n.named.touch(name)
	}
}

// namedPeerGone: the host of to refuses connections, so its process is
// gone. Every named election that follows it campaigns now. In plain mode
// its candidacies go first, as on gossip's word that it died (which comes
// a suspicion timeout later): a campaign would otherwise still count it, a
// bully candidate ranked below it would ask it first and wait for that
// send to fail, and a ring would pass it a token. It stands again with its
// next Candidacy (a restarted process announces itself). In quorum mode
// the candidacies and voters follow gossip alone (the machines keep every
// member as a voter), as before.
//
// Once taken in, the peer's further refusals change nothing until it is
// heard from, joins again, or one of this node's machines follows it again
// (namedState.gone), and they are skipped.
func (n *Node) namedPeerGone(to election.NodeID) {
	if n.halted() || to == 0 {
		return
	}
	if _, done := n.named.gone[to]; done {
		return
	}
	if n.named.gone == nil {
		n.named.gone = map[election.NodeID]struct{}{}
	}
	n.named.gone[to] = struct{}{}
	if !n.namedQuorum() {
		n.forgetCandidate(to, election.EventDead)
	}
	var followers []string
	for name, nm := range n.named.machines {
		if st := nm.sm.Status(); st.Role == election.RoleFollower && st.Leader == to {
			followers = append(followers, name)
		}
	}
	n.timeOutLeader(followers)
	// The node stops vouching for it last: a quiet follower takes the
	// death above as it took it before quiet following, as word about a
	// leader it had heard from (ignored), and campaigns on the timeout at
	// once; unvouched first, it would take the death and wait a jittered
	// suspicion delay before campaigning.
	n.forgetPair(to)
}
