package node

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// TestTimelineRecordsFailover: the timeline holds the first election and
// the failover after the leader is killed, oldest first, with the new term,
// the role and the cause the log line gives.
func TestTimelineRecordsFailover(t *testing.T) {
	c := newCluster(t, "bully", 3)
	first := c.agree(5*time.Second, 3)
	tl := c.nodes[1].Timeline()
	if len(tl) == 0 {
		t.Fatal("no leader change recorded after the first election")
	}
	last := tl[len(tl)-1]
	if last.Leader != 3 || last.Term != first.Term || last.Role != StateFollower || last.Cause == "" || last.At.IsZero() {
		t.Fatalf("last change after the first election: %+v, want leader 3 term %v as a follower with a cause", last, first.Term)
	}
	if err := c.nodes[3].Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := c.agree(5*time.Second, 2)
	tl2 := c.nodes[1].Timeline()
	if len(tl2) <= len(tl) {
		t.Fatalf("the timeline did not grow on failover: %d -> %d changes", len(tl), len(tl2))
	}
	last = tl2[len(tl2)-1]
	if last.Leader != 2 || last.Term != second.Term || last.Term <= first.Term {
		t.Fatalf("last change after the failover: %+v, want leader 2 at %v (above %v)", last, second.Term, first.Term)
	}
	for i := 1; i < len(tl2); i++ {
		if tl2[i].At.Before(tl2[i-1].At) {
			t.Fatalf("not oldest first: %+v before %+v", tl2[i-1], tl2[i])
		}
	}
	if lead := c.nodes[2].Timeline(); lead[len(lead)-1].Role != StateLeader {
		t.Fatalf("the new leader's last change: %+v, want role leader", lead[len(lead)-1])
	}
}

// TestTimelineKeepsTheLast64: older changes fall off; readers racing the
// writer see a consistent, ordered list.
func TestTimelineKeepsTheLast64(t *testing.T) {
	n := &Node{}
	if got := n.Timeline(); got == nil || len(got) != 0 {
		t.Fatalf("a node without changes: %v, want an empty list", got)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 200 {
			tl := n.Timeline()
			for i := 1; i < len(tl); i++ {
				if tl[i].Term != tl[i-1].Term+1 {
					t.Errorf("a reader saw a gap: %v then %v", tl[i-1].Term, tl[i].Term)
					return
				}
			}
		}
	}()
	for i := 1; i <= 100; i++ {
		n.recordChange(election.Leadership{Role: election.RoleFollower, Leader: 1, Term: election.Term(i)}, "test")
	}
	wg.Wait()
	tl := n.Timeline()
	if len(tl) != TimelineSize || tl[0].Term != 100-TimelineSize+1 || tl[len(tl)-1].Term != 100 {
		t.Fatalf("kept %d changes, terms %v..%v; want the last %d, 37..100", len(tl), tl[0].Term, tl[len(tl)-1].Term, TimelineSize)
	}
}
