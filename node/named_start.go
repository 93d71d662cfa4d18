package node

import (
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
)

// A new election's first leader.
//
// A node that stands in an election no other node's candidacy is known in
// could lead it at once, and when it is the only candidate it should. But
// the apps of a sharded service start together, every replica standing in
// every shard: a node that claimed at once claimed beside every other
// node that did, and each election then had five leaders to reconcile
// (at 10,000 elections on five nodes, 1.8 million Candidacy and 600,000
// Coordinator messages where 200,000 and 40,000 say it all). So the
// candidates of a new election campaign in rank order instead, the order
// bully and ring would elect in: a node counts the live nodes that would
// outrank it if they stood (their rank is unknown until their candidacy
// comes, so each is taken to stand as this node's app does: at its
// priority, and under spread with its own hash), and waits a step for
// each. The best-ranked live node claims at once; the others hear its
// candidacy, and its announcement to them as new members, before their
// turn, and follow. A lone candidate still leads, a step per live node
// above it later.
//
// A step is what the best-ranked node's claim takes to reach the others:
// the pass that stands it in every election started together and their
// Candidacies, so it grows with their number.

// startStep is the least wait per live node ranked above, in ticks; a
// step is also startPerElection for each election started in the same
// pass.
const startStep = 5

// startPerElection is about what one new election costs the node that
// claims it and the nodes that hear of it, when many start together: at
// 10,000 on five nodes, each node's pass standing in them all and their
// Candidacies took about a second.
const startPerElection = 100 * time.Microsecond

// machineStart is how a new machine comes to its first campaign.
type machineStart struct {
	// together: the elections this node started in the same pass (each
	// step of the wait grows with their number); 0, the machine waits as
	// a restarted one does, having not heard again who stands.
	together int
	// ranked: the candidates already known are ranked with the live nodes
	// not heard from, and if none says it leads, the best-ranked campaigns
	// a step later (a claim made before it stood may be on its way): a
	// new app's candidacy. Otherwise a known candidate makes the machine
	// wait its own timeout (the next app of a queue, whose node just
	// handed the election to one of them).
	ranked bool
}

// firstWait is how long name's machine waits before its first campaign:
// 0, campaign now (no live node would outrank this one, and no candidate
// is known yet); -1, the machine's own wait (a known candidate leads, or
// is known at all and first is not ranked, or the events of gossip's
// first join have not all been taken, so the live nodes are not known).
// In quorum mode, once those are taken: now if no candidate is known, else
// the machine's own wait.
func (n *Node) firstWait(name string, head named.Candidacy, first machineStart) int {
	if _, _, leads := n.named.table.Leader(name); leads {
		return -1
	}
	if !n.gossipSynced {
		// The members gossip learnt at the join are still on their way
		// (a node restarted under an app that reconnected at once): none
		// of them may outrank this one, or lead already, for all it knows.
		return -1
	}
	known := n.named.table.Members(name)
	if len(known) > 0 && (!first.ranked || n.namedQuorum()) {
		return -1
	}
	if n.namedQuorum() {
		// A quorum's claim is a proposal every voter answers, and its
		// machine already has every live voter as a member: one waiting
		// its steps would wait its first election's rank order (coldWait)
		// on top.
		return 0
	}
	spread := false
	if c := n.named.subs[head.ID]; c != nil {
		spread = c.Placement == PlacementSpread
	}
	self := election.Rank{Priority: head.Priority, ID: n.cfg.Self.ID}
	above := 0
	for _, m := range known {
		if m.Rank().Compare(self) > 0 {
			above++
		}
	}
	for id, rec := range n.members {
		if id == n.cfg.Self.ID || !rec.alive {
			continue
		}
		if _, ok := n.named.table.Get(name, id); ok {
			continue // ranked above by its candidacy
		}
		r := election.Rank{Priority: head.Priority, ID: id}
		if spread {
			r.Priority = named.SpreadRank(name, id, spreadPriority(head.Priority))
		}
		if r.Compare(self) > 0 {
			above++
		}
	}
	if above == 0 && len(known) > 0 {
		// The others stood first: one of them may have claimed already
		// (this node was not up when its turn came), its word on the way.
		// A step lets it arrive, to be followed rather than contested.
		return startStep
	}
	step := max(startStep, int(time.Duration(first.together)*startPerElection/n.cfg.Tick))
	return above * step
}
