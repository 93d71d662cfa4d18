package integration

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/electord/electord/config"
	"github.com/electord/electord/daemon"
	"github.com/electord/electord/daemon/daemontest"
	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
)

// ids are the node ids of ds.
func ids(ds []*daemon.Daemon) []election.NodeID {
	out := make([]election.NodeID, len(ds))
	for i, d := range ds {
		out[i] = election.NodeID(d.Config.ID)
	}
	return out
}

// TestQuorumPartitionedMinority: with quorum 5, cutting {4,5} from {1,2,3}
// leaves the minority with no leader and the majority led by node 3; after
// the heal all five agree again.
func TestQuorumPartitionedMinority(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		// The fault hooks cut peer traffic only; gossip still flows.
		var faults daemontest.Network
		c := startCluster(t, devcluster.Options{Nodes: 5, Algorithm: alg, Quorum: 5, Peers: faults.Hook})
		l0 := waitAgreement(t, c.Nodes, 10*time.Second, "first election with quorum 5")
		if l0.ID != 5 {
			t.Fatalf("quorum 5: the cluster agreed on node %d (term %v), want node 5", l0.ID, l0.Term)
		}
		majority, minority := only(c.Nodes, 1, 2, 3), only(c.Nodes, 4, 5)
		tl := recordTimelines(t, c.Nodes)
		faults.Partition(ids(majority), ids(minority))
		cut := time.Now()

		eventually(t, 5*time.Second, "the minority {4,5} has no leader and the majority {1,2,3} agrees on node 3", func() (bool, string) {
			var b strings.Builder
			ok := true
			for _, d := range minority {
				li := d.Node.Leader()
				code, body := httpGet(t, "http://"+d.HTTPAddr+"/leader")
				fmt.Fprintf(&b, "node %d: leader %d term %v state %s, GET /leader %d %s; ", d.Config.ID, li.ID, li.Term, li.State, code, strings.TrimSpace(string(body)))
				ok = ok && !li.HasLeader() && code == http.StatusServiceUnavailable
			}
			lm, agreed := agreement(majority)
			ok = ok && agreed && lm.ID == 3
			b.WriteString("majority: " + describeViews(majority))
			return ok, b.String()
		})
		lm, _ := agreement(majority)
		if lm.Term <= l0.Term {
			t.Errorf("the majority's leader 3 has term %v, not above the old term %v", lm.Term, l0.Term)
		}
		t.Logf("partitioned: minority leaderless, majority led by node 3 in term %v, %v after the cut", lm.Term, time.Since(cut).Round(time.Millisecond))

		// Keep the partition for a few leader timeouts: the minority must
		// stay leaderless (its nodes keep campaigning and must keep failing).
		// The timelines catch what polling misses.
		hold := 4 * config.DefaultHeartbeatTimeout
		for end := time.Now().Add(hold); time.Now().Before(end); time.Sleep(pollInterval) {
			for _, d := range minority {
				if li := d.Node.Leader(); li.HasLeader() {
					t.Fatalf("minority node %d shows leader %d (term %v, %s) while partitioned", d.Config.ID, li.ID, li.Term, li.State)
				}
			}
		}
		healAt := time.Now()
		for _, d := range minority {
			id := election.NodeID(d.Config.ID)
			evs := tl.events(id)
			lost := false
			for _, e := range evs {
				if e.at.Before(cut) {
					continue
				}
				if !e.li.HasLeader() {
					lost = true
				} else if lost && e.at.Before(healAt) {
					t.Errorf("minority node %d showed leader %d (term %v, %s) at +%v, after it had lost its leader and while partitioned; events:\n%s",
						id, e.li.ID, e.li.Term, e.li.State, e.at.Sub(cut).Round(time.Millisecond), tl.describe(id, cut))
					break
				}
			}
		}
		// One leader at a time: node 5 stops leading before node 3 starts.
		end5, start3 := tl.leadEnd(5, cut), tl.leadStart(3, cut)
		t.Logf("node 5 stopped leading at +%v, node 3 started at +%v (gap %v)", end5.Sub(cut).Round(time.Millisecond),
			start3.Sub(cut).Round(time.Millisecond), start3.Sub(end5).Round(time.Millisecond))
		if start3.Before(end5) {
			t.Errorf("quorum mode had two leaders at once: node 3 led from +%v while node 5 still led until +%v\nnode 5:\n%s\nnode 3:\n%s",
				start3.Sub(cut), end5.Sub(cut), tl.describe(5, cut), tl.describe(3, cut))
		}

		faults.Heal()
		lh := waitAgreement(t, c.Nodes, 10*time.Second, "all five agree after the heal")
		if lh.Term < lm.Term {
			t.Errorf("after the heal the cluster agrees on node %d in term %v, below the majority's term %v", lh.ID, lh.Term, lm.Term)
		}
		t.Logf("healed: node %d leads in term %v", lh.ID, lh.Term)
	})
}

// TestNoQuorumPartition is the contrast: without quorum both sides of the
// same partition have a leader, in different terms; the heal merges them.
func TestNoQuorumPartition(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		var faults daemontest.Network
		c := startCluster(t, devcluster.Options{Nodes: 5, Algorithm: alg, Peers: faults.Hook})
		l0 := waitAgreement(t, c.Nodes, 10*time.Second, "first election")
		if l0.ID != 5 {
			t.Fatalf("the cluster agreed on node %d (term %v), want node 5", l0.ID, l0.Term)
		}
		majority, minority := only(c.Nodes, 1, 2, 3), only(c.Nodes, 4, 5)
		faults.Partition(ids(majority), ids(minority))

		var lmaj, lmin = l0, l0
		eventually(t, 5*time.Second, "both sides have a leader, in different terms", func() (bool, string) {
			var okMaj, okMin bool
			lmaj, okMaj = agreement(majority)
			lmin, okMin = agreement(minority)
			return okMaj && okMin && lmaj.ID == 3 && lmin.ID == 5 && lmaj.Term != lmin.Term,
				"majority: " + describeViews(majority) + "; minority: " + describeViews(minority)
		})
		t.Logf("partitioned: majority led by node %d in term %v, minority by node %d in term %v", lmaj.ID, lmaj.Term, lmin.ID, lmin.Term)

		faults.Heal()
		lh := waitAgreement(t, c.Nodes, 10*time.Second, "all five agree after the heal")
		if hi := max(lmaj.Term, lmin.Term); lh.Term < hi {
			t.Errorf("after the heal the cluster agrees on node %d in term %v, below the partition's highest term %v", lh.ID, lh.Term, hi)
		}
		t.Logf("healed: node %d leads in term %v", lh.ID, lh.Term)
	})
}

// timelines records every leadership event of a set of nodes, with the
// time it was received.
type timelines struct {
	mu  sync.Mutex
	evs map[election.NodeID][]stamped
}

type stamped struct {
	at time.Time
	li node.LeaderInfo
}

func recordTimelines(t *testing.T, ds []*daemon.Daemon) *timelines {
	tl := &timelines{evs: map[election.NodeID][]stamped{}}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // after the Closes below (cleanups run last first)
	for _, d := range ds {
		sub := d.Node.Subscribe()
		id := election.NodeID(d.Config.ID)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for li := range sub.C() {
				tl.mu.Lock()
				tl.evs[id] = append(tl.evs[id], stamped{time.Now(), li})
				tl.mu.Unlock()
			}
		}()
		t.Cleanup(sub.Close)
	}
	return tl
}

func (tl *timelines) events(id election.NodeID) []stamped {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.Clone(tl.evs[id])
}

func (tl *timelines) describe(id election.NodeID, ref time.Time) string {
	var b strings.Builder
	for _, e := range tl.events(id) {
		fmt.Fprintf(&b, "  %+8v leader %d term %v state %s\n", e.at.Sub(ref).Round(time.Millisecond), e.li.ID, e.li.Term, e.li.State)
	}
	return b.String()
}

// leadEnd is when node id stopped leading after ref (ref if it did not lead
// then; the far future if it still leads).
func (tl *timelines) leadEnd(id election.NodeID, ref time.Time) time.Time {
	leading := false
	for _, e := range tl.events(id) {
		self := e.li.Self && e.li.State == node.StateLeader
		if e.at.Before(ref) {
			leading = self
			continue
		}
		if leading && !self {
			return e.at
		}
		leading = self
	}
	if leading {
		return time.Now().Add(time.Hour)
	}
	return ref
}

// leadStart is when node id first led after ref (the far future if never).
func (tl *timelines) leadStart(id election.NodeID, ref time.Time) time.Time {
	for _, e := range tl.events(id) {
		if !e.at.Before(ref) && e.li.Self && e.li.State == node.StateLeader {
			return e.at
		}
	}
	return time.Now().Add(time.Hour)
}
