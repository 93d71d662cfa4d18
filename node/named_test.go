package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// nextEvent waits for a candidacy event that satisfies ok, failing the test
// at the deadline.
func nextEvent(t *testing.T, c *Candidacy, d time.Duration, ok func(CandidacyEvent) bool) CandidacyEvent {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev, open := <-c.Events():
			if !open {
				t.Fatalf("candidacy %d in %s ended", c.ID, c.Election)
			}
			if ok(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("candidacy %d in %s: no matching event within %v", c.ID, c.Election, d)
		}
	}
}

func isEvent(name string) func(CandidacyEvent) bool {
	return func(ev CandidacyEvent) bool { return ev.Event == name }
}

// observed waits until node nd shows leader id in the named election.
func observed(t *testing.T, nd *Node, name string, id election.NodeID, value string, d time.Duration) LeaderInfo {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		li, _ := nd.ElectionLeader(name)
		if li.ID == id && li.Value == value {
			return li
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d sees %+v in %s, want leader %d with value %q", nd.Self(), li, name, id, value)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestNamedElectionFollowsItsCandidacies(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			c := newCluster(t, algo, 3)
			c.agree(10*time.Second, 0)
			ctx := context.Background()
			a, err := c.nodes[1].Campaign(ctx, "jobs", "app-a:8080", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			nextEvent(t, a, time.Second, isEvent(EventCandidate))
			first := nextEvent(t, a, 10*time.Second, isEvent(EventLeader))
			if first.Leader.ID != 1 || first.Leader.Value != "app-a:8080" || first.Leader.Term == 0 {
				t.Fatalf("leader event %+v", first)
			}
			b, err := c.nodes[2].Campaign(ctx, "jobs", "app-b:8080", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			// Sticky: the sitting leader keeps it; b follows it.
			f := nextEvent(t, b, 10*time.Second, isEvent(EventFollower))
			if f.Leader.ID != 1 || f.Leader.Value != "app-a:8080" {
				t.Fatalf("b sees %+v", f.Leader)
			}
			// Node 3 has no candidate: it observes.
			observed(t, c.nodes[3], "jobs", 1, "app-a:8080", 10*time.Second)
			// The default election is not touched by any of it.
			if li := c.nodes[3].Leader(); li.ID != 3 {
				t.Fatalf("default election leader %d, want 3", li.ID)
			}

			// The leading app's stream ends: b leads, at a higher token.
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			won := nextEvent(t, b, 10*time.Second, isEvent(EventLeader))
			if won.Leader.ID != 2 || won.Leader.Term <= first.Leader.Term || won.Leader.Value != "app-b:8080" {
				t.Fatalf("after a closed: %+v (a led at %v)", won.Leader, first.Leader.Term)
			}
			for _, id := range []election.NodeID{1, 3} {
				observed(t, c.nodes[id], "jobs", 2, "app-b:8080", 10*time.Second)
			}
			// a's withdrawal and b's leadership come to node 3 from two
			// senders, in either order: the list settles on one candidate.
			deadline := time.Now().Add(10 * time.Second)
			for {
				els := c.nodes[3].NamedElections()
				if len(els) == 1 && els[0].Election == "jobs" && els[0].Candidates == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("node 3 lists %+v", els)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

func TestNamedElectionQueuesLocalApps(t *testing.T) {
	c := newCluster(t, "bully", 2)
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
	q := nextEvent(t, b, 10*time.Second, isEvent(EventFollower))
	if q.QueuedBehind != 1 || q.Leader.Value != "a" {
		t.Fatalf("queued app sees %+v", q)
	}
	a.Close()
	// No other node stands: the next local app leads, at a new token.
	got := nextEvent(t, b, 10*time.Second, isEvent(EventLeader))
	if got.Leader.Term <= led.Leader.Term || got.Leader.Value != "b" || got.QueuedBehind != 0 {
		t.Fatalf("next app leads with %+v; the first led at %v", got, led.Leader.Term)
	}
	observed(t, c.nodes[2], "jobs", 1, "b", 10*time.Second)
}

func TestNamedElectionRefusesBadNames(t *testing.T) {
	c := newCluster(t, "bully", 1)
	if _, err := c.nodes[1].Campaign(context.Background(), "no/slash", "", 0); err == nil {
		t.Fatal("a name with a slash was taken")
	}
}

// A killed node stands in nothing and shows no leader; revived, it stands
// again for its queued app, and its term never goes back.
func TestNamedElectionKillAndRevive(t *testing.T) {
	c := newCluster(t, "bully", 3)
	c.agree(10*time.Second, 0)
	ctx := context.Background()
	a, err := c.nodes[1].Campaign(ctx, "jobs", "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	led := nextEvent(t, a, 10*time.Second, isEvent(EventLeader))
	b, err := c.nodes[2].Campaign(ctx, "jobs", "b", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	nextEvent(t, b, 10*time.Second, isEvent(EventFollower))

	if err := c.nodes[1].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	nextEvent(t, a, 10*time.Second, func(ev CandidacyEvent) bool { return ev.Event == EventCandidate && ev.Leader.ID == 0 })
	won := nextEvent(t, b, 10*time.Second, isEvent(EventLeader))
	if won.Leader.Term <= led.Leader.Term {
		t.Fatalf("b leads at %v, a led at %v", won.Leader.Term, led.Leader.Term)
	}
	observed(t, c.nodes[3], "jobs", 2, "b", 10*time.Second)

	if err := c.nodes[1].Revive(ctx); err != nil {
		t.Fatal(err)
	}
	// Sticky: b keeps leading; a follows it again.
	f := nextEvent(t, a, 10*time.Second, isEvent(EventFollower))
	if f.Leader.ID != 2 || f.Leader.Term != won.Leader.Term {
		t.Fatalf("revived a sees %+v, want b at %v", f.Leader, won.Leader.Term)
	}
}

// A watch on an observer follows the election from before anyone stands;
// a resign hands the leadership to the other candidate, whose app keeps
// standing as the resigned one does.
func TestNamedElectionWatchAndResign(t *testing.T) {
	c := newCluster(t, "ring", 3)
	c.agree(10*time.Second, 0)
	ctx := context.Background()
	w, err := c.nodes[3].WatchElection(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	watched := func(id election.NodeID) LeaderInfo {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case li := <-w.C():
				if li.ID == id {
					return li
				}
			case <-deadline:
				t.Fatalf("the watch never showed node %d leading", id)
			}
		}
	}
	if li := <-w.C(); li.ID != 0 || li.Election != "jobs" {
		t.Fatalf("first event %+v, want no leader in jobs", li)
	}
	a, _ := c.nodes[1].Campaign(ctx, "jobs", "a", 0)
	defer a.Close()
	nextEvent(t, a, 10*time.Second, isEvent(EventLeader))
	b, _ := c.nodes[2].Campaign(ctx, "jobs", "b", 0)
	defer b.Close()
	nextEvent(t, b, 10*time.Second, isEvent(EventFollower))
	first := watched(1)
	if err := c.nodes[2].ResignElection(ctx, "jobs"); err == nil {
		t.Fatal("a follower resigned")
	}
	if err := c.nodes[1].ResignElection(ctx, "jobs"); err != nil {
		t.Fatal(err)
	}
	if li := watched(2); li.Term <= first.Term || li.Value != "b" {
		t.Fatalf("after the resign the watch shows %+v", li)
	}
	nextEvent(t, a, 10*time.Second, func(ev CandidacyEvent) bool { return ev.Event == EventFollower && ev.Leader.ID == 2 })
}

// Proclaim changes the leading value everywhere without an election; a
// node with no such candidacy refuses it.
func TestNamedElectionProclaim(t *testing.T) {
	c := newCluster(t, "bully", 3)
	c.agree(10*time.Second, 0)
	ctx := context.Background()
	a, err := c.nodes[1].Campaign(ctx, "jobs", "v1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	led := nextEvent(t, a, 10*time.Second, isEvent(EventLeader))
	observed(t, c.nodes[3], "jobs", 1, "v1", 10*time.Second)
	if err := a.Proclaim(ctx, "v2"); err != nil {
		t.Fatal(err)
	}
	li := observed(t, c.nodes[3], "jobs", 1, "v2", 10*time.Second)
	if li.Term != led.Leader.Term {
		t.Fatalf("proclaim moved the term %v -> %v", led.Leader.Term, li.Term)
	}
	again := nextEvent(t, a, 10*time.Second, func(ev CandidacyEvent) bool { return ev.Leader.Value == "v2" })
	if again.Event != EventLeader || again.Leader.Term != led.Leader.Term || again.Candidacy != a.ID {
		t.Fatalf("after proclaim the candidacy sees %+v", again)
	}
	if err := c.nodes[2].Proclaim(ctx, "jobs", 0, "x"); !errors.Is(err, ErrNotStanding) {
		t.Fatalf("proclaim on a node that does not stand: %v", err)
	}
}

// A node that stands in an election shows it as its machine sees it, with
// the leader's value from the leader's candidacy: a proclaim reaches it
// and its app, though the leadership it follows stays the same.
func TestNamedElectionProclaimReachesAFollowingCandidate(t *testing.T) {
	c := newCluster(t, "bully", 3)
	c.agree(10*time.Second, 0)
	ctx := context.Background()
	a, err := c.nodes[3].Campaign(ctx, "jobs", "v1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	led := nextEvent(t, a, 10*time.Second, isEvent(EventLeader))
	b, err := c.nodes[1].Campaign(ctx, "jobs", "w", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	nextEvent(t, b, 10*time.Second, func(ev CandidacyEvent) bool {
		return ev.Event == EventFollower && ev.Leader.ID == 3 && ev.Leader.Value == "v1"
	})
	if err := a.Proclaim(ctx, "v2"); err != nil {
		t.Fatal(err)
	}
	li := observed(t, c.nodes[1], "jobs", 3, "v2", 10*time.Second)
	if li.Term != led.Leader.Term {
		t.Fatalf("proclaim moved the term %v -> %v", led.Leader.Term, li.Term)
	}
	nextEvent(t, b, 10*time.Second, func(ev CandidacyEvent) bool {
		return ev.Event == EventFollower && ev.Leader.ID == 3 && ev.Leader.Value == "v2"
	})
}

// A node restarted faster than gossip declares it dead is never seen to
// leave or join. Its app campaigns again: the node must hear the others'
// candidacies and follow the election's leader, not stand alone in it and
// lead it with a token of its own while the others follow another app.
// "withdrew": the app ended its candidacy before the node stopped (the
// others heard it). "killed": the node and its app died together, so the
// others still hold the candidacy of its earlier process; only its
// incarnation tells them that one is void. A follower's restart does not
// move the leadership then: the restarted node waits for the others' word,
// as it waits for the default election's.
func TestNamedElectionAfterAQuietRestart(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		for _, how := range []string{"withdrew", "killed"} {
			t.Run(algo+"/"+how, func(t *testing.T) {
				c, won, other := namedPairBeforeRestart(t, algo)
				if how == "withdrew" {
					other.Close()
				}
				n1 := c.quietRestart(1)
				again, err := n1.Campaign(context.Background(), "jobs", "app-1", 0)
				if err != nil {
					t.Fatal(err)
				}
				defer again.Close()
				// After a withdrawal the node stands as a new candidate: it
				// may lead alone for a moment, before the others'
				// candidacies reach it, and its fresh leadership, at a
				// higher term, can win. After a kill, node 3 keeps leading
				// at its term.
				agreed := namedAgreement(t, c, 10*time.Second, func(li LeaderInfo) bool {
					if how == "killed" {
						return li.ID == 3 && li.Term == won.Leader.Term
					}
					return li.Term >= won.Leader.Term
				})
				t.Logf("after node 1's quiet restart: node %d leads jobs at term %v", agreed.ID, agreed.Term)
			})
		}
	}
}

// A node killed with its app and restarted at once, whose app does not
// come back: the leader held its earlier process's candidacy; its next
// message of the election to the restarted node is answered with a
// withdrawal, so the leader stops counting it as a candidate (it would
// hand the leadership over to it, or wait for its answers).
func TestNamedElectionQuietRestartWithoutTheApp(t *testing.T) {
	c, _, _ := namedPairBeforeRestart(t, "bully")
	c.quietRestart(1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var cands int
		for _, e := range c.nodes[3].NamedElections() {
			if e.Election == "jobs" {
				cands = e.Candidates
			}
		}
		if cands == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after node 1's quiet restart without its app, node 3 counts %d candidates in jobs, want 1", cands)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an outcome
	}
}

// An observer (node 2 stands in nothing) restarted faster than gossip
// notices learns the leader of jobs anyway: it announces its incarnation to
// every member it meets, and those that knew its earlier process answer
// with their candidacies.
func TestNamedElectionObserverQuietRestart(t *testing.T) {
	c, won, _ := namedPairBeforeRestart(t, "bully")
	n2 := c.quietRestart(2)
	deadline := time.Now().Add(10 * time.Second)
	for {
		li, _ := n2.ElectionLeader("jobs")
		if li.ID == 3 && li.Term == won.Leader.Term {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after its quiet restart, observer node 2 shows %+v in jobs, want node 3 at %v", li, won.Leader.Term)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an outcome
	}
}

// namedPairBeforeRestart starts three nodes: app-3 leads jobs through
// node 3 (won is its event), app-1 (other) follows through node 1.
func namedPairBeforeRestart(t *testing.T, algo string) (*cluster, CandidacyEvent, *Candidacy) {
	c := newCluster(t, algo, 3)
	c.agree(10*time.Second, 0)
	ctx := context.Background()
	lead, err := c.nodes[3].Campaign(ctx, "jobs", "app-3", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lead.Close() })
	won := nextEvent(t, lead, 10*time.Second, isEvent(EventLeader))
	other, err := c.nodes[1].Campaign(ctx, "jobs", "app-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	nextEvent(t, other, 10*time.Second, isEvent(EventFollower))
	return c, won, other
}

// namedAgreement waits until every node names one leader of jobs at one
// term, for which ok holds, and returns it.
func namedAgreement(t *testing.T, c *cluster, d time.Duration, ok func(LeaderInfo) bool) LeaderInfo {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var views []LeaderInfo
		for _, id := range []election.NodeID{1, 2, 3} {
			li, _ := c.nodes[id].ElectionLeader("jobs")
			views = append(views, li)
		}
		if views[0].ID != 0 && views[0].ID == views[1].ID && views[1].ID == views[2].ID &&
			views[0].Term == views[1].Term && views[1].Term == views[2].Term && ok(views[0]) {
			return views[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("within %v the nodes name %+v, %+v and %+v in jobs", d, views[0], views[1], views[2])
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an outcome
	}
}
