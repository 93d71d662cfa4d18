package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// cutSides cuts every link between the nodes of a and those of b.
func (c *cluster) cutSides(a, b []election.NodeID) {
	for _, x := range a {
		for _, y := range b {
			c.net.Cut(x, y)
		}
	}
}

// namedLeaders is who says it leads name (Self), and every node's view.
func (c *cluster) namedLeaders(name string) (claims []election.NodeID, views string) {
	for id := election.NodeID(1); int(id) <= len(c.nodes); id++ {
		li, _ := c.nodes[id].ElectionLeader(name)
		if li.Self {
			claims = append(claims, id)
		}
		views += fmt.Sprintf(" %d:%d@%v", id, li.ID, li.Term)
	}
	return claims, views
}

// agreeNamed waits until every running node names one leader of name, at one
// term, above after; it returns that leadership.
func (c *cluster) agreeNamed(name string, after election.Term, d time.Duration) LeaderInfo {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		var first LeaderInfo
		ok := true
		for id := election.NodeID(1); int(id) <= len(c.nodes); id++ {
			if c.cancel[id] == nil {
				continue // stopped
			}
			li, _ := c.nodes[id].ElectionLeader(name)
			if li.ID == 0 || li.Term <= after || (first.ID != 0 && (li.ID != first.ID || li.Term != first.Term)) {
				ok = false
				break
			}
			first = li
		}
		if ok {
			return first
		}
		if time.Now().After(deadline) {
			_, views := c.namedLeaders(name)
			c.t.Fatalf("%s: no agreement on one leader above %v within %v:%s", name, after, d, views)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an outcome
	}
}

// In quorum mode the cluster's nodes vote in every named election, so a
// minority side never elects, even with every candidate of the election on
// it: 5 nodes, quorum 5 (a majority of 3), apps on nodes 1 and 2 only.
// Without the voters (plain mode, the candidates alone), the two candidates
// cut off from the rest keep electing each other.
func TestNamedQuorumMinorityNeverElects(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			c := newQuorumCluster(t, algo, 5, 5, nil)
			c.agree(10*time.Second, 0)
			ctx := context.Background()
			a, err := c.nodes[1].Campaign(ctx, "jobs", "a", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := c.nodes[2].Campaign(ctx, "jobs", "b", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			first := c.agreeNamed("jobs", 0, 10*time.Second)
			if first.ID != 1 && first.ID != 2 {
				t.Fatalf("leader %d: only nodes 1 and 2 stand", first.ID)
			}
			// The voters count the candidates, not themselves.
			for id := election.NodeID(3); id <= 5; id++ {
				els := c.nodes[id].NamedElections()
				if len(els) != 1 || els[0].Candidates != 2 || els[0].Local != 0 {
					t.Fatalf("node %d lists %+v", id, els)
				}
			}

			minority, majority := []election.NodeID{1, 2}, []election.NodeID{3, 4, 5}
			c.cutSides(minority, majority)
			// The leader steps down within its lease (the node's quorum
			// lease at these timings is under 250 ms; 2 s for a loaded host).
			deadline := time.Now().Add(2 * time.Second)
			for {
				claims, views := c.namedLeaders("jobs")
				if len(claims) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("still claimed while cut off from a majority:%s", views)
				}
				time.Sleep(5 * time.Millisecond)
			}
			// And nobody is elected while the cut lasts: ten leader timeouts,
			// in which the two candidates would elect each other many times
			// over without the voters.
			watch := time.Now().Add(2500 * time.Millisecond)
			for time.Now().Before(watch) {
				if claims, views := c.namedLeaders("jobs"); len(claims) > 0 {
					t.Fatalf("elected on a minority side (%v):%s", claims, views)
				}
				time.Sleep(2 * time.Millisecond)
			}
			c.net.Heal()
			healed := c.agreeNamed("jobs", first.Term, 10*time.Second)
			if healed.ID != 1 && healed.ID != 2 {
				t.Fatalf("leader %d after the heal: only nodes 1 and 2 stand", healed.ID)
			}
		})
	}
}

// Candidates on every node of a quorum cluster: the leading app's stream
// ends, and another node's app leads at a higher token, seen by all.
func TestNamedQuorumAppLeaves(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			c := newQuorumCluster(t, algo, 5, 5, nil)
			c.agree(10*time.Second, 0)
			ctx := context.Background()
			apps := map[election.NodeID]*Candidacy{}
			for id := election.NodeID(1); id <= 5; id++ {
				a, err := c.nodes[id].Campaign(ctx, "jobs", fmt.Sprintf("app-%d", id), 0)
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close()
				apps[id] = a
			}
			first := c.agreeNamed("jobs", 0, 10*time.Second)
			start := time.Now()
			if err := apps[first.ID].Close(); err != nil {
				t.Fatal(err)
			}
			next := c.agreeNamed("jobs", first.Term, 10*time.Second)
			t.Logf("%s: app on node %d closed at %v; node %d leads at %v after %v", algo, first.ID, first.Term, next.ID, next.Term, time.Since(start))
			if next.ID == first.ID {
				t.Fatalf("node %d leads again after its only app left", next.ID)
			}
			if next.Value != fmt.Sprintf("app-%d", next.ID) {
				t.Fatalf("leader %d shows value %q", next.ID, next.Value)
			}
			// The node whose app left is a voter now: it lists the four
			// other candidates, none of its own, and refuses Elections.
			els := c.nodes[first.ID].NamedElections()
			if len(els) != 1 || els[0].Candidates != 4 || els[0].Local != 0 {
				t.Fatalf("node %d lists %+v", first.ID, els)
			}
		})
	}
}

// A node's app leaves and another app queued on it stands: it leads only at
// a new term, never at the one the app before it held, even with no other
// candidate anywhere (the voters then pass the leadership back).
func TestNamedQuorumQueuedAppLeadsAtANewTerm(t *testing.T) {
	c := newQuorumCluster(t, "bully", 3, 3, nil)
	c.agree(10*time.Second, 0)
	ctx := context.Background()
	a, err := c.nodes[1].Campaign(ctx, "jobs", "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	led := nextEvent(t, a, 10*time.Second, isEvent(EventLeader))
	b, err := c.nodes[1].Campaign(ctx, "jobs", "b", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a.Close()
	got := nextEvent(t, b, 10*time.Second, isEvent(EventLeader))
	if got.Leader.Term <= led.Leader.Term || got.Leader.Value != "b" {
		t.Fatalf("next app leads with %+v; the first led at %v", got.Leader, led.Leader.Term)
	}
	c.agreeNamed("jobs", led.Leader.Term, 10*time.Second)
	// The last app leaves, nobody stands anywhere: every machine goes.
	b.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := 0
		for _, nd := range c.nodes {
			n += len(nd.NamedElections())
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			_, views := c.namedLeaders("jobs")
			t.Fatalf("elections still listed after the last app left:%s", views)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// In quorum mode a named leadership is claimed only while its lease holds
// by the wall clock, as the default election's: a leader whose loop is
// stalled past its lease (a paused or starved process) stops claiming
// although its last published state says it leads, because the others
// may elect another once the promises they gave it end.
func TestNamedQuorumStalledLeaderStopsClaiming(t *testing.T) {
	c := newQuorumCluster(t, "bully", 3, 3, nil)
	c.agree(10*time.Second, 0)
	c.standApps("jobs", 3)
	li := c.agreeNamed("jobs", 0, 10*time.Second)
	n := c.nodes[li.ID]
	if own, _ := n.ElectionLeader("jobs"); !own.Self {
		t.Fatalf("node %d: leads jobs but does not claim it: %+v", li.ID, own)
	}
	release := make(chan struct{})
	stalled := make(chan struct{})
	go n.do(context.Background(), func() error { close(stalled); <-release; return nil })
	defer close(release)
	<-stalled
	deadline := time.Now().Add(5 * time.Second)
	for {
		own, _ := n.ElectionLeader("jobs")
		if !own.Self {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d: its loop stalled for 5 s, well past its lease, and it still claims jobs at %v", li.ID, own.Term)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an outcome
	}
}

// A named leader whose loop resumes after a stall longer than its lease
// (SIGSTOP) must not claim again on the ticks it slept through: its clock
// applies every tick it missed while it leads, as the default election's
// does, so its lease, counted in ticks from promises taken before the
// stall, ends at once. Were the missed ticks dropped, the machine would
// still count its lease as running, and the node would publish a lease
// reaching past the wall clock's end, claiming beside the leader the
// others elected meanwhile. The stalled leader is cut off too, so nothing
// but its own clock can end its leadership.
func TestNamedQuorumResumedLeaderClaimsNothing(t *testing.T) {
	c := newQuorumCluster(t, "bully", 5, 5, nil)
	c.agree(10*time.Second, 0)
	c.standApps("jobs", 5)
	ctx := context.Background()
	// Another election, led elsewhere: the leader of jobs votes in it, so
	// its named clock is due every heartbeat interval, before its lease
	// of jobs ends.
	aux, err := c.nodes[1].Campaign(ctx, "aux", "aux-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer aux.Close()
	c.agreeNamed("aux", 0, 10*time.Second)
	li := c.agreeNamed("jobs", 0, 10*time.Second)
	n := c.nodes[li.ID]
	release := make(chan struct{})
	stalled := make(chan struct{})
	go n.do(context.Background(), func() error { close(stalled); <-release; return nil })
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	<-stalled
	var others []election.NodeID
	for id := election.NodeID(1); id <= 5; id++ {
		if id != li.ID {
			others = append(others, id)
		}
	}
	c.cutSides([]election.NodeID{li.ID}, others)
	// The others elect one of them, once the promises they gave end.
	deadline := time.Now().Add(10 * time.Second)
	for {
		claims, views := c.namedLeaders("jobs")
		if len(claims) == 1 && claims[0] != li.ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no other leader while node %d is stalled:%s", li.ID, views)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an outcome
	}
	released = true
	close(release)
	// The resumed leader's lease ended long ago by the wall clock; it must
	// not claim at all. Watch it for a few leases (the lease at these
	// timings is under 250 ms), having it publish jobs again at every
	// loop pass, as any message of the election would (a Candidacy queued
	// while it was stalled, a follower's heartbeat).
	watch := time.Now().Add(time.Second)
	for time.Now().Before(watch) {
		if err := n.do(ctx, func() error { n.named.dirty["jobs"] = true; return nil }); err != nil {
			t.Fatal(err)
		}
		if own, _ := n.ElectionLeader("jobs"); own.Self {
			_, views := c.namedLeaders("jobs")
			t.Fatalf("node %d claims jobs at %v again after its stall, beside the new leader:%s", li.ID, own.Term, views)
		}
	}
}
