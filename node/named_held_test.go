package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
)

// walkedOwnDigest is the own digest counted from scratch: every election
// whose queue has a head and where a machine runs, as its Candidacies say
// it. ownDigest keeps the same number as the standing changes.
func (n *Node) walkedOwnDigest() uint64 {
	var d named.Digest
	for name, head := range n.named.queues.Heads() {
		if nm := n.named.machines[name]; nm != nil {
			d.Add(name, headStand(head, nm))
		}
	}
	return d.Sum()
}

// The own digest, kept as the standing changes, is the digest counted
// from scratch at every moment: through the campaigns opening, the
// leaderships forming, a value changed, one app's withdrawal from every
// election, a node's kill (its leaderships move) and revival; in plain
// mode and in quorum mode, where a node that withdrew keeps its machines
// as a voter.
func TestOwnDigestKeptAsItChanges(t *testing.T) {
	for _, quorum := range []int{0, 3} {
		t.Run(fmt.Sprintf("quorum %d", quorum), func(t *testing.T) { ownDigestKept(t, quorum) })
	}
}

func ownDigestKept(t *testing.T, quorum int) {
	c := newTunedCluster(t, "bully", 3, quorum, nil, nil)
	opts := shardNames(40)
	check := func(when string) {
		t.Helper()
		for id, nd := range c.nodes {
			var kept, walked uint64
			if err := nd.do(context.Background(), func() error {
				kept, walked = nd.ownDigest(), nd.walkedOwnDigest()
				return nil
			}); err != nil {
				continue // killed or stopped: nothing to compare
			}
			if kept != walked {
				t.Fatalf("%s: node %d keeps its own digest as %x, counted from scratch it is %x", when, id, kept, walked)
			}
		}
	}
	// watch checks, until cond holds or the deadline passes, on every
	// loop of every node, as often as it can.
	watch := func(when string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			check(when)
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 20 s", when)
			}
			time.Sleep(2 * time.Millisecond)
		}
		check(when)
	}
	sets := map[election.NodeID]*CandidacySet{}
	for _, id := range []election.NodeID{1, 2, 3} {
		s, err := c.nodes[id].CampaignMany(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		sets[id] = s
		t.Cleanup(func() { s.Close() })
		check(fmt.Sprintf("node %d's campaigns opened", id))
	}
	watch("agreeing", func() bool { return c.notAgreed(opts) == 0 })

	name := opts[7].Election
	if err := c.nodes[1].Proclaim(context.Background(), name, 0, "changed"); err != nil {
		t.Fatal(err)
	}
	check("a value changed")

	sets[3].Close()
	watch("node 3's app withdrawn", func() bool {
		standing := false
		c.nodes[3].do(context.Background(), func() error {
			standing = c.nodes[3].named.queues.Len() > 0
			return nil
		})
		return !standing && c.notAgreed(opts) == 0
	})

	// The node of 1 and 2 that leads more is killed; the other then leads
	// every election.
	led := func(by, id election.NodeID) int {
		k := 0
		for _, o := range opts {
			if li, _ := c.nodes[by].ElectionLeader(o.Election); li.ID == id {
				k++
			}
		}
		return k
	}
	victim, other := election.NodeID(1), election.NodeID(2)
	if led(1, 2) > led(1, 1) {
		victim, other = 2, 1
	}
	if led(other, victim) == 0 {
		t.Fatalf("node %d leads none of the elections: its kill would move nothing", victim)
	}
	if err := c.nodes[victim].Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	watch(fmt.Sprintf("node %d killed", victim), func() bool { return led(other, other) == len(opts) })
	if err := c.nodes[victim].Revive(context.Background()); err != nil {
		t.Fatal(err)
	}
	watch(fmt.Sprintf("node %d revived", victim), func() bool { return c.notAgreed(opts) == 0 })
}
