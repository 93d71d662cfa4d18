package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
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
// any real node) and the settings of a bully cluster. It leaves when the
// test ends.
func startForger(t *testing.T, id uint64, peer, key, seed string) {
	t.Helper()
	startForgerOf(t, "bully", id, peer, key, seed)
}

// startForgerOf is startForger in a cluster of algorithm alg.
func startForgerOf(t *testing.T, alg string, id uint64, peer, key, seed string) {
	t.Helper()
	meta, err := json.Marshal(map[string]any{"id": id, "name": "forger", "priority": 0,
		"peer": peer, "api": peer, "http": peer, "since": 1,
		"settings": map[string]any{"algorithm": alg, "quorum": 0, "preempt": false}})
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
	// Two clusters at a time (see TestSecureCluster).
	for _, ps := range peerServers {
		t.Run(ps, func(t *testing.T) {
			t.Parallel()
			testForgedClaims(t)
		})
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

// assertNotListed fails the test if a process lists one of ids as a
// member, alive or dead.
func assertNotListed(t *testing.T, ps []*proc, ids ...uint64) {
	t.Helper()
	for _, p := range ps {
		ms, err := p.cl.Members(ctxTimeout(t, 2*time.Second))
		if err != nil {
			t.Fatalf("members of node %d: %v", p.id, err)
		}
		for _, m := range ms {
			if slices.Contains(ids, uint64(m.ID)) {
				t.Fatalf("node %d lists the unproven node %d as a member: %+v", p.id, m.ID, m)
			}
		}
	}
}
