package node

import (
	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
)

// The digests of the candidacies' anti-entropy (named_resend.go): once a
// period a node tells every live member what it holds of that member's
// candidacies, in one number, and a member whose own digest of its
// standing differs sends it a round.

// sendHeldDigests sends every live member the digest of its candidacies
// as this node holds them, and wants a round for each member that never
// sent a digest itself (an older node, or one this node has not yet heard
// one from: a member that joined or restarted since), except at this
// node's first period. Then no member could have sent one yet if they
// started together, as a cluster's nodes and apps do: a round to each was
// every candidacy again to every member (at 10,000 elections, 40,000
// copies per node) as they started. A node that starts in a running
// cluster has most members' digests by then; one it has not heard from
// gets its round a period later, and a digest that differs gets one at
// once.
func (n *Node) sendHeldDigests() {
	r := &n.named.resend
	if r.want == nil {
		r.want = map[election.NodeID]bool{}
	}
	held := n.named.table.Digests()
	for id, rec := range n.members {
		if !rec.alive || id == n.cfg.Self.ID {
			continue
		}
		d, ok := held[id]
		if !ok {
			d = named.Digest{}.Sum() // holds none of them
		}
		m := n.notStanding("")
		m.To, m.Held = id, d
		n.cfg.Transport.Send(m)
		if !r.digesters[id] && r.period > 1 {
			r.want[id] = true
		}
	}
}

// heldDigestFrom takes a peer's digest of this node's candidacies (a
// Candidacy of no election; Held 0: it said none), and wants a round for
// the peer when the digest differs from this node's own.
func (n *Node) heldDigestFrom(m election.Message) {
	if m.Held == 0 || n.halted() {
		return
	}
	r := &n.named.resend
	if r.digesters == nil {
		r.digesters = map[election.NodeID]bool{}
	}
	if r.want == nil {
		r.want = map[election.NodeID]bool{}
	}
	r.digests++
	r.digesters[m.From] = true
	if m.Held != n.ownDigest() {
		r.differed++
		r.want[m.From] = true
	}
}

// ownDigest is the digest of this node's standing in every election it
// stands in, as its Candidacies say it (standingIn), counted once a period:
// every member's digest of the period is compared with it. A change since
// it was counted was sent to the members too, so at worst one period's
// comparison misses a lost copy (the next finds it) or finds a difference
// that is not there (a round too many).
func (n *Node) ownDigest() uint64 {
	r := &n.named.resend
	if r.ownIn == r.period+1 {
		return r.own
	}
	var d named.Digest
	for _, name := range n.named.queues.Elections() {
		if n.standsIn(name) {
			d.Add(name, standOf(n.standingIn(name)))
		}
	}
	r.own, r.ownIn = d.Sum(), r.period+1
	return r.own
}
