package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
)

// lateRelease delays a named election's releases (a leader's word that it
// claims nothing any more) by d: over a real network they travel on other
// links than the successor's proposal, which may overtake them.
type lateRelease struct {
	transport.Transport
	d time.Duration
}

func (l lateRelease) Send(m election.Message) {
	if m.Release && m.Election != "" {
		time.AfterFunc(l.d, func() { l.Transport.Send(m) })
		return
	}
	l.Transport.Send(m)
}

// In quorum mode the leading app's stream ending is a graceful withdrawal:
// its node hands the leadership over and releases the promises its
// followers gave it, so the next candidate leads at once, far sooner than
// those promises would end on their own, even when the successor's
// proposal reaches the followers before the old leader's release does (a
// follower bound to the old leader refuses it, and acknowledges it once the
// release comes). 5 nodes, quorum 5, an app on each, a heartbeat timeout of
// 3 s (a promise of about 3.5 s, so that a loaded host's slowness is not
// taken for a wait on a promise), every release 30 ms late; the leading app
// leaves 20 times (and comes back), and each time another leads within
// 1.5 s, well before any promise would have ended.
func TestNamedQuorumLeaderAppLeavesHandsOverAtOnce(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			late := func(_ election.NodeID, tr transport.Transport) transport.Transport {
				return lateRelease{tr, 30 * time.Millisecond}
			}
			c := newTunedCluster(t, algo, 5, 5, late, func(cfg *Config) {
				cfg.HeartbeatInterval, cfg.HeartbeatTimeout = 200*time.Millisecond, 3*time.Second
			})
			c.agree(10*time.Second, 0)
			ctx := context.Background()
			apps := map[election.NodeID]*Candidacy{}
			stand := func(id election.NodeID) {
				a, err := c.nodes[id].Campaign(ctx, "jobs", fmt.Sprintf("app-%d", id), 0)
				if err != nil {
					t.Fatal(err)
				}
				apps[id] = a
			}
			for id := election.NodeID(1); id <= 5; id++ {
				stand(id)
			}
			defer func() {
				for _, a := range apps {
					a.Close()
				}
			}()
			li := c.agreeNamed("jobs", 0, 10*time.Second)
			const bound = 1500 * time.Millisecond
			var worst time.Duration
			for i := range 20 {
				// Let the followers' heartbeats renew their promises, at a
				// different phase each time.
				time.Sleep(time.Duration(50+37*i%200) * time.Millisecond)
				start := time.Now()
				apps[li.ID].Close()
				delete(apps, li.ID)
				next := c.agreeNamed("jobs", li.Term, 10*time.Second)
				took := time.Since(start)
				worst = max(worst, took)
				if took > bound {
					t.Errorf("round %d: app on node %d left at %v; node %d leads at %v after %v, over %v (a promise's length)", i, li.ID, li.Term, next.ID, next.Term, took, bound)
				}
				stand(li.ID)
				li = c.agreeNamed("jobs", next.Term-1, 10*time.Second)
			}
			t.Logf("%s: worst handover %v", algo, worst)
		})
	}
}

// A node whose loop stops (SIGTERM: the daemon cancels it, then the loop
// leaves gossip, which can take seconds while its API still answers) shows
// no named leadership of its own from then on: its peers stop counting it
// as soon as they hear of the leave, and elect another.
func TestStoppedNodeClaimsNoNamedElection(t *testing.T) {
	for _, quorum := range []int{0, 5} {
		t.Run(fmt.Sprintf("quorum%d", quorum), func(t *testing.T) {
			c := newTunedCluster(t, "bully", 5, quorum, nil, nil)
			c.agree(10*time.Second, 0)
			c.standApps("jobs", 5)
			li := c.agreeNamed("jobs", 0, 10*time.Second)
			nd := c.nodes[li.ID]
			if got, _ := nd.ElectionLeader("jobs"); !got.Self {
				t.Fatalf("node %d leads jobs at %v but does not show it: %+v", li.ID, li.Term, got)
			}
			c.stop(li.ID)
			if got, _ := nd.ElectionLeader("jobs"); got.Self {
				t.Fatalf("node %d stopped and still shows itself leading jobs: %+v", li.ID, got)
			}
		})
	}
}
