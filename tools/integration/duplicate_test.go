package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/config"
	"github.com/electord/electord/daemon"
	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
)

// TestDuplicateNodeID: a fourth node started with id 2 joins a running
// 3-node cluster. The cluster's leader and term do not change, the newcomer
// stands down (killed) and never leads, and the original node 2 keeps
// working: it stays a live member, follows, and can take leadership.
// TestDuplicateNodeID: a fourth node started with the id of a member joins
// a running 3-node cluster. The cluster's leader and term do not change, the
// newcomer stands down (killed) and never leads, and the original holder of
// the id keeps working: it stays a live member everywhere, follows (or
// leads), and can take leadership. "follower-id" is the duplicate of node 2;
// "leader-id" the duplicate of the sitting leader.
func TestDuplicateNodeID(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		t.Run("follower-id", func(t *testing.T) { testDuplicateID(t, alg, false) })
		t.Run("leader-id", func(t *testing.T) { testDuplicateID(t, alg, true) })
	})
}

func testDuplicateID(t *testing.T, alg string, ofLeader bool) {
	c := startCluster(t, devcluster.Options{Nodes: 3, Algorithm: alg})
	l0 := waitAgreement(t, c.Nodes, 10*time.Second, "first election")
	dupID := election.NodeID(2)
	if ofLeader {
		dupID = l0.ID
	} else if l0.ID == dupID {
		t.Fatalf("node 2 leads; the test wants a follower's id")
	}
	orig := nodeByID(t, c, dupID)

	// Watch every original node from before the newcomer exists.
	tl := recordTimelines(t, c.Nodes)
	start := time.Now()

	cfg := devConfig(int(dupID), alg, t.TempDir(), []string{c.Nodes[0].GossipAddr})
	cfg.Name = fmt.Sprintf("node-%d-duplicate", dupID)
	dup, err := daemon.Start(cfg, daemon.Options{Logger: testLogger(cfg.Name)})
	if err != nil {
		t.Fatalf("starting the duplicate: %v", err)
	}
	stopDup := func() {
		if err := dup.Stop(); err != nil {
			t.Errorf("stopping the duplicate: %v", err)
		}
	}
	defer stopDup()
	dupSub := dup.Node.Subscribe()
	defer dupSub.Close()

	eventually(t, 5*time.Second, "the duplicate stands down (Status().Killed)", func() (bool, string) {
		st := dup.Node.Status()
		return st.Killed, fmt.Sprintf("duplicate: killed=%v leader %d term %v state %s; conflicts seen: duplicate %d, original %d",
			st.Killed, st.Leader.ID, st.Leader.Term, st.Leader.State, dup.Node.Counters().Conflicts.Load(), orig.Node.Counters().Conflicts.Load())
	})
	t.Logf("the duplicate stood down %v after it started", time.Since(start).Round(time.Millisecond))

	// Observe for a few leader timeouts: the cluster must not notice.
	checkUnchanged := func(when string) {
		t.Helper()
		for _, d := range c.Nodes {
			id := election.NodeID(d.Config.ID)
			for _, e := range tl.events(id) {
				if e.li.ID != l0.ID || e.li.Term != l0.Term {
					t.Fatalf("%s: node %d's leadership changed: leader %d term %v state %s at +%v (was node %d in term %v)\n%s\nmembers as node 1 sees them: %s",
						when, id, e.li.ID, e.li.Term, e.li.State, e.at.Sub(start).Round(time.Millisecond), l0.ID, l0.Term,
						tl.describe(id, start), describeMembers(c.Nodes[0]))
				}
			}
		}
	}
	// Meanwhile the original must stay a live member on every node.
	window := 4 * config.DefaultHeartbeatTimeout
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(pollInterval) {
		if li, ok := agreement(c.Nodes); !ok || li.ID != l0.ID || li.Term != l0.Term {
			checkUnchanged("after the duplicate joined")
			t.Fatalf("the cluster changed after the duplicate joined: %s (was node %d in term %v)", describeViews(c.Nodes), l0.ID, l0.Term)
		}
		for _, d := range c.Nodes {
			for _, m := range d.Node.Members() {
				if m.ID == dupID && !m.Alive {
					checkUnchanged("after the duplicate joined")
					t.Fatalf("+%v after the duplicate started: node %d lists the original node %d as not alive (the duplicate's stand-down took it out of gossip?); members as node %d sees them: %s",
						time.Since(start).Round(time.Millisecond), d.Config.ID, dupID, d.Config.ID, describeMembers(d))
				}
			}
		}
	}
	checkUnchanged("after the duplicate joined")
	for done := false; !done; {
		select {
		case li := <-dupSub.C():
			if li.Self || li.State == node.StateLeader {
				t.Errorf("the duplicate led (term %v)", li.Term)
			}
		default:
			done = true
		}
	}

	// The original is still a live member everywhere.
	checkMember := func(when string) {
		t.Helper()
		eventually(t, 5*time.Second, fmt.Sprintf("%s: every node lists node %d alive at its own address", when, dupID), func() (bool, string) {
			var b strings.Builder
			ok := true
			for _, d := range c.Nodes {
				for _, m := range d.Node.Members() {
					if m.ID != dupID {
						continue
					}
					fmt.Fprintf(&b, "node %d sees %d alive=%v api=%s; ", d.Config.ID, dupID, m.Alive, m.APIAddr)
					ok = ok && m.Alive && m.APIAddr == orig.APIAddr
				}
			}
			return ok, b.String()
		})
	}
	checkMember("with the duplicate killed")

	// Stopping the (killed) duplicate changes nothing either.
	stopDup()
	checkMember("after the duplicate stopped")
	checkUnchanged("after the duplicate stopped")

	// The original still works: it can take leadership (or keeps it).
	if !ofLeader {
		if _, err := newClient(t, apiAddrs(c.Nodes)...).Transfer(ctxTimeout(t, 5*time.Second), dupID); err != nil {
			t.Fatalf("Transfer(%d): %v", dupID, err)
		}
	}
	eventually(t, 5*time.Second, fmt.Sprintf("the original node %d leads", dupID), func() (bool, string) {
		li, ok := agreement(c.Nodes)
		return ok && li.ID == dupID && orig.Node.Leader().Self, describeViews(c.Nodes)
	})
}

func describeMembers(d *daemon.Daemon) string {
	var b strings.Builder
	for _, m := range d.Node.Members() {
		fmt.Fprintf(&b, "%d(alive=%v) ", m.ID, m.Alive)
	}
	return b.String()
}
