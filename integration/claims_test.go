package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/electord/electord/client"
)

// Issue 12, item 7: "Conflicts over a term slot or an id are not settled by
// a start time the newcomer reports about itself." The attacker has the
// gossip key (a leaked key file, or a compromised machine without a node
// certificate) and runs a hand-made memberlist node, not electord.

// forgedNode is a memberlist delegate gossiping fixed metadata.
type forgedNode struct{ meta []byte }

func (f forgedNode) NodeMeta(int) []byte                  { return f.meta }
func (forgedNode) NotifyMsg([]byte)                       {}
func (forgedNode) GetBroadcasts(int, int) [][]byte        { return nil }
func (forgedNode) LocalState(bool) []byte                 { return nil }
func (forgedNode) MergeRemoteState(buf []byte, join bool) {}

// startForger joins seed's gossip (encrypted with key, labelled like the
// secure clusters) as a memberlist node named id whose metadata claims id,
// peer as its peer address, a start at 1 ns after the epoch (earlier than
// any real node) and the cluster's settings. It leaves when the test ends.
func startForger(t *testing.T, id uint64, peer, key, seed string) {
	t.Helper()
	meta, err := json.Marshal(map[string]any{"id": id, "name": "forger", "priority": 0,
		"peer": peer, "api": peer, "http": peer, "since": 1,
		"settings": map[string]any{"algorithm": "bully", "quorum": 0, "preempt": false}})
	if err != nil {
		t.Fatal(err)
	}
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		t.Fatal(err)
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = strconv.FormatUint(id, 10)
	port := freePort(t)
	mc.BindAddr, mc.BindPort, mc.AdvertiseAddr, mc.AdvertisePort = "127.0.0.1", port, "127.0.0.1", port
	if mc.Keyring, err = memberlist.NewKeyring([][]byte{k}, k); err != nil {
		t.Fatal(err)
	}
	mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	mc.Label = secureClusterName
	mc.Delegate = forgedNode{meta}
	mc.LogOutput = io.Discard
	list, err := memberlist.Create(mc)
	if err != nil {
		t.Fatalf("forged node %d: %v", id, err)
	}
	t.Cleanup(func() { list.Shutdown() })
	if _, err := list.Join([]string{seed}); err != nil {
		t.Fatalf("forged node %d joining %s: %v", id, seed, err)
	}
}

// TestSecureClusterForgedClaims: three electord processes with mutual TLS
// and a gossip key (bully, both peer servers). A hand-made memberlist node
// with the gossip key but no node certificate claims, reporting a start
// time of 1:
//
//   - id 65536+L, the term slot of the leader L (the 65539 when
//     node 3 leads), with the leader's peer address as its own: every node
//     refuses it (logged with the reason, "unproven id"), never lists it, and
//     the leader and term do not move. Before item 7 the earlier start won
//     the slot: every node withdrew the leader and the leader stood down.
//   - the leader's own id, with the leader's peer address, joining the
//     leader's gossip: the leader refuses it (the proof leads back to
//     itself) and keeps leading. Before, the leader stood down as "the
//     later" node.
//
// The partition-heal case (each side knew its own holder of a slot; after
// the heal every node computes the same holder) is
// TestSecureClusterSlotAfterPartitionHeal below, and
// membership.TestSlotAfterPartitionHeal on memberlist nodes alone.
func TestSecureClusterForgedClaims(t *testing.T) {
	for _, ps := range []string{"lf", "grpc"} {
		t.Run(ps, testForgedClaims)
	}
}

func testForgedClaims(t *testing.T) {
	k := newPKI(t, 1, 2, 3)
	key := newGossipKey(t)
	ps := startSecureProcs(t, k, 3, "bully", key, secureTiming...)
	l0 := waitProcAgreement(t, ps, 30*time.Second, "three secure processes agree on a leader", nil)
	eventually(t, 10*time.Second, "every node lists every node alive", func() (bool, string) { return membersComplete(ps) })
	w := watchLeaders(t, ps)
	leader := procByID(ps, l0.ID)
	var follower *proc
	for _, p := range ps {
		if p != leader {
			follower = p
			break
		}
	}

	// The leader's term slot under another id.
	slotID := uint64(1)<<16 + uint64(l0.ID)
	startForger(t, slotID, leader.peer, key, follower.gossip)
	holdsFor(t, ps, w, l0, fewTimeouts, "after a forged claim of the leader's term slot")
	for _, p := range ps {
		waitLog(t, p, 5*time.Second, 1, "refused claim", fmt.Sprintf("node %d at", slotID), "cannot prove id", "unproven id")
	}
	assertNotListed(t, ps, slotID)

	// The leader's own id, at the leader's peer address.
	startForger(t, uint64(l0.ID), leader.peer, key, leader.gossip)
	holdsFor(t, ps, w, l0, fewTimeouts, "after a forged claim of the leader's id")
	waitLog(t, leader, 5*time.Second, 1, "refused claim", fmt.Sprintf("claims this node's id %d", l0.ID),
		"leads back to this node", "unproven id")
	if countIn(leader, "standing down") != 0 {
		t.Fatalf("the leader logged that it stands down")
	}
	assertNotListed(t, ps, slotID)
}

// assertNotListed fails the test if a process lists id as a member.
func assertNotListed(t *testing.T, ps []*proc, id uint64) {
	t.Helper()
	for _, p := range ps {
		ms, err := p.cl.Members(ctxTimeout(t, 2*time.Second))
		if err != nil {
			t.Fatalf("members of node %d: %v", p.id, err)
		}
		for _, m := range ms {
			if m.ID == client.NodeID(id) {
				t.Fatalf("node %d lists the forged node %d: %+v", p.id, id, m)
			}
		}
	}
}

// TestSecureClusterSlotAfterPartitionHeal: two sides of a partition each
// settle term slot 2 on their own holder and lead with it: {1, 2} (node 2
// leads) and {3, 65538} (node 65538 leads), each with mutual TLS and its own
// gossip key, so neither side's gossip reaches the other. The heal: every
// node's key file gets the other side's key as a second key (read live), and
// node 3's seed, node 1, now answers. Every node then computes the same
// holder of slot 2, the lower id: 1, 2 and 3 list exactly {1, 2, 3}, agree on
// one leader, and node 65538 stands down naming the lower id. (A rule that
// let the holder each side knew longer keep the slot would leave both.)
func TestSecureClusterSlotAfterPartitionHeal(t *testing.T) {
	const hi = 1<<16 + 2
	k := newPKI(t, 1, 2, 3, hi)
	dir := t.TempDir()
	keyA, keyB := newGossipKey(t), newGossipKey(t)
	var ps []*proc
	for _, id := range []int{1, 2, 3, hi} {
		p := newProc(t, dir, id, "bully")
		p.cl = newTLSClient(t, k, "web", p.api)
		key := keyA
		if id >= 3 {
			key = keyB
		}
		if err := os.WriteFile(gossipKeyFile(dir, id), []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p.extra = append([]string{"--tls-ca", k.ca(), "--tls-cert", k.nodeCert(id), "--tls-key", k.nodeKey(id),
			"--gossip-key-file", gossipKeyFile(dir, id)}, secureTiming...)
		ps = append(ps, p)
	}
	n1, n2, n3, nhi := ps[0], ps[1], ps[2], ps[3]
	n2.join = []string{n1.gossip}
	n3.join = []string{n1.gossip} // the other side: refused until the heal
	nhi.join = []string{n3.gossip}
	stopOnCleanup(t, ps)
	// Side B first: 65538 reports the earlier start (the old rule, "the
	// earlier start keeps the slot", would give it the slot after the heal).
	for _, p := range []*proc{n3, nhi} {
		p.start()
	}
	waitLog(t, nhi, 30*time.Second, 1, "electord started")
	for _, p := range []*proc{n1, n2} {
		p.start()
	}
	a := waitProcAgreement(t, []*proc{n1, n2}, 30*time.Second, "side {1, 2} agrees on a leader", nil)
	b := waitProcAgreement(t, []*proc{n3, nhi}, 30*time.Second, "side {3, 65538} agrees on a leader", nil)
	if a.ID != 2 || b.ID != hi {
		t.Fatalf("leaders before the heal: %d and %d, want 2 and %d", a.ID, b.ID, hi)
	}
	t.Logf("before the heal: side A led by %d at %v, side B by %d at %v", a.ID, a.Term, b.ID, b.Term)

	for _, p := range ps {
		own, other := keyA, keyB
		if p.id >= 3 {
			own, other = keyB, keyA
		}
		writeFileAtomic(t, gossipKeyFile(dir, p.id), []byte(own+"\n"+other+"\n"))
	}
	healed := ps[:3]
	eventually(t, 60*time.Second, "nodes 1, 2 and 3 each list exactly {1, 2, 3} alive", func() (bool, string) {
		var sb strings.Builder
		ok := true
		for _, p := range healed {
			ms, err := p.cl.Members(ctxTimeout(t, time.Second))
			if err != nil {
				fmt.Fprintf(&sb, "%d:error(%v) ", p.id, err)
				ok = false
				continue
			}
			var alive []int
			for _, m := range ms {
				if m.Alive {
					alive = append(alive, int(m.ID))
				}
			}
			slices.Sort(alive)
			fmt.Fprintf(&sb, "%d:%v ", p.id, alive)
			ok = ok && slices.Equal(alive, []int{1, 2, 3})
		}
		return ok, sb.String()
	})
	waitLog(t, nhi, 15*time.Second, 1, "standing down", "whose id is lower and keeps the slot")
	l := waitProcAgreement(t, healed, 30*time.Second, "nodes 1, 2 and 3 agree on one leader after the heal", nil)
	if l.ID == hi {
		t.Fatalf("node %d leads after the heal", hi)
	}
	for _, p := range healed {
		if countIn(p, "refused claim") != 0 {
			t.Errorf("node %d refused a claim; every node here holds a certificate for its id:\n%s", p.id, p.log())
		}
	}
	t.Logf("after the heal: nodes 1-3 agree on leader %d at %v; node %d stood down", l.ID, l.Term, hi)
}
