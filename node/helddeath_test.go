package node

import (
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// deadTo tells node to's gossip that member id is dead, as memberlist does
// when a suspicion of it times out.
func (c *cluster) deadTo(to, id election.NodeID) {
	c.t.Helper()
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	c.hub.members[to].events <- MemberEvent{Type: MemberDead, Member: Meta{ID: id, Name: c.nodes[id].cfg.Self.Name}}
}

// A follower whose gossip wrongly declares its leader dead (the leader is
// up and answering it) keeps following it: the verdict is held while the
// leader is heard from. Once the leader goes silent for the heartbeat
// timeout, the held verdict is applied and the follower moves on. Without
// the hold the follower refused the leader's answers ("not a live member")
// and lost its leader a timeout later.
func TestGossipDeathOfAMemberStillHeardIsHeld(t *testing.T) {
	for _, quorum := range []int{0, 3} {
		t.Run(map[int]string{0: "plain", 3: "quorum"}[quorum], func(t *testing.T) {
			c := newQuorumCluster(t, "bully", 3, quorum, nil)
			li := c.agree(5*time.Second, 3)
			sub := c.nodes[1].Subscribe()
			defer sub.Close()
			<-sub.C() // the current state
			c.deadTo(1, 3)
			timeout := c.nodes[1].cfg.HeartbeatTimeout
			quiet := time.After(3 * timeout)
		watch:
			for {
				select {
				case v := <-sub.C():
					if v.ID != 3 || v.Term != li.Term {
						t.Fatalf("node 1 left its live leader after gossip called it dead: %+v", v)
					}
				case <-quiet:
					break watch
				}
			}
			if !memberAlive(c.nodes[1], 3) {
				t.Fatal("node 1 lists node 3 dead while it hears from it")
			}
			// Now node 3 really goes silent towards node 1: the held
			// verdict takes effect once the silence lasts the timeout.
			c.net.Cut(1, 3)
			end := time.Now().Add(10 * timeout)
			for memberAlive(c.nodes[1], 3) {
				if time.Now().After(end) {
					t.Fatalf("node 1 still lists node 3 alive, silent and declared dead, after %v", 10*timeout)
				}
				time.Sleep(5 * time.Millisecond) // polling, not a wait for an outcome
			}
		})
	}
}

// memberAlive reports whether n lists member id as alive.
func memberAlive(n *Node, id election.NodeID) bool {
	for _, m := range n.Members() {
		if m.ID == id {
			return m.Alive
		}
	}
	return false
}
