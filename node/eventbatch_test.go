package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// A burst of membership events (a cluster forming) is taken in batches
// (moreEvents), and the published member list ends with every member, the
// leadership untouched.
func TestABurstOfJoinsIsPublishedWhole(t *testing.T) {
	for _, algo := range []string{"ring", "bully"} {
		t.Run(algo, func(t *testing.T) {
			c := newCluster(t, algo, 3)
			li := c.agree(5*time.Second, 3)
			c.hub.mu.Lock()
			g := c.hub.members[1]
			c.hub.mu.Unlock()
			const burst = 3*maxEventBatch + 5
			for i := range burst {
				id := election.NodeID(1000 + i)
				g.events <- MemberEvent{Type: MemberJoin, Member: Meta{ID: id, Name: fmt.Sprintf("x%d", id), PeerAddr: fmt.Sprintf("mem:%d", id)}}
			}
			end := time.Now().Add(5 * time.Second)
			for len(c.nodes[1].Status().Members) != 3+burst {
				if time.Now().After(end) {
					t.Fatalf("%d members listed, want %d", len(c.nodes[1].Status().Members), 3+burst)
				}
				time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an outcome
			}
			if got := c.nodes[2].Leader(); got.ID != li.ID || got.Term != li.Term {
				t.Fatalf("the leadership moved: %+v, was %+v", got, li)
			}
		})
	}
}
