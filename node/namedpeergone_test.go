package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
)

// In plain mode, a named election's leader whose host refuses connections
// (transport.ErrPeerDown: its process is gone) is dropped as a candidate by
// every node that sees the refusal, before they campaign: nobody asks it
// anything (a bully candidate ranked below it would send it an Election and
// wait for that send to fail; a ring would pass it the token). 5 nodes, an
// app on each; the leader vanishes without a word from gossip, sends to it
// hang, and the refusal is all the others learn.
func TestNamedPeerGoneIsNotAsked(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			c := newCluster(t, algo, 5)
			c.agree(10*time.Second, 0)
			c.standApps("jobs", 5)
			li := c.agreeNamed("jobs", 0, 10*time.Second)
			gone := li.ID

			var mu sync.Mutex
			var asked []string
			watching := false
			c.net.SetCutDelay(time.Minute)
			c.net.SetHook(func(m election.Message) bool {
				mu.Lock()
				defer mu.Unlock()
				if watching && m.To == gone && m.Election == "jobs" && m.Type != election.MsgCandidacy {
					asked = append(asked, fmt.Sprintf("%v from %d at %v", m.Type, m.From, m.Term))
				}
				return true
			})
			c.hub.mu.Lock()
			c.hub.members[gone].quiet = true
			c.hub.mu.Unlock()
			c.stop(gone)
			for id := range c.nodes {
				if id != gone {
					c.net.Cut(id, gone)
				}
			}
			mu.Lock()
			watching = true
			mu.Unlock()
			for id, nd := range c.nodes {
				if id != gone {
					nd.in.Failed(election.Message{Type: election.MsgHeartbeat, From: id, To: gone},
						fmt.Errorf("%w: its host refused", transport.ErrPeerDown))
				}
			}

			next := c.agreeNamed("jobs", li.Term, 10*time.Second)
			mu.Lock()
			defer mu.Unlock()
			if len(asked) > 0 {
				t.Errorf("node %d led jobs at %v and its host refuses connections; node %d leads at %v, but the others still sent it: %v",
					gone, li.Term, next.ID, next.Term, asked)
			}
		})
	}
}

// A peer's refusals are taken in once (namedPeerGone: its candidacies
// forgotten, its followers campaigning) and the repeats skipped, until the
// peer is heard from again: a refusal after that is taken in again. Here
// the "refused" leader is alive, so it speaks again, its candidacy comes
// back at the follower that saw the refusal, and the follower's next
// refusal must drop the candidacy again. Each refusal is given on the
// follower's loop and its outcome read there, in the same call.
func TestNamedPeerGoneAgainAfterThePeerSpoke(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			c := newCluster(t, algo, 3)
			c.agree(10*time.Second, 0)
			c.standApps("jobs", 3)
			li := c.agreeNamed("jobs", 0, 10*time.Second)
			to := li.ID
			f := c.nodes[to%3+1]
			stands := func() (in bool) {
				if err := f.do(context.Background(), func() error {
					_, in = f.named.table.Get("jobs", to)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				return in
			}
			refuse := func(round string) {
				t.Helper()
				var still bool
				var follows election.NodeID
				if err := f.do(context.Background(), func() error {
					f.namedPeerGone(to)
					_, still = f.named.table.Get("jobs", to)
					if st := f.named.machines["jobs"].sm.Status(); st.Role == election.RoleFollower {
						follows = st.Leader
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if still || follows == to {
					t.Fatalf("%s refusal of node %d at node %d: its candidacy kept %v, followed %v", round, to, f.cfg.Self.ID, still, follows == to)
				}
			}
			if !stands() {
				t.Fatalf("node %d does not hold leader %d's candidacy before any refusal", f.cfg.Self.ID, to)
			}
			refuse("the first")
			// The refused node is alive: its candidacy comes back with its
			// next word (anti-entropy) and the election agrees again.
			deadline := time.Now().Add(10 * time.Second)
			for !stands() {
				if time.Now().After(deadline) {
					t.Fatalf("node %d's candidacy never came back to node %d", to, f.cfg.Self.ID)
				}
				time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an outcome
			}
			refuse("a refusal after the peer spoke:")
		})
	}
}

// A ring round that passed a peer before its host refused connections can
// come back to its initiator naming that peer the winner, and the
// initiator then follows it without a word from it. The peer's next
// refusal must time the machine out again, not be skipped as one already
// taken in. Ring, 3 nodes: the follower f takes a refusal of the leader
// (alive: nothing here depends on it being dead), campaigns, and its round
// is held back and handed to it as if it had come round with the leader
// as the only candidate.
func TestNamedPeerGoneAgainAfterARoundAdoptedIt(t *testing.T) {
	c := newCluster(t, "ring", 3)
	c.agree(10*time.Second, 0)
	c.standApps("jobs", 3)
	to := c.agreeNamed("jobs", 0, 10*time.Second).ID
	f := c.nodes[to%3+1]
	self := f.cfg.Self.ID
	round := make(chan election.Message, 1)
	c.net.SetHook(func(m election.Message) bool {
		if m.Type == election.MsgElection && m.Election == "jobs" && m.From == self && m.Initiator == self {
			select {
			case round <- m:
			default:
			}
			return false // the round never comes back by itself
		}
		return true
	})
	follows := func() (id election.NodeID) {
		if st := f.named.machines["jobs"].sm.Status(); st.Role == election.RoleFollower {
			id = st.Leader
		}
		return id
	}
	if err := f.do(context.Background(), func() error { f.namedPeerGone(to); return nil }); err != nil {
		t.Fatal(err)
	}
	var m election.Message
	select {
	case m = <-round:
	case <-time.After(10 * time.Second):
		t.Fatalf("node %d started no round after the refusal of node %d", self, to)
	}
	// Back from the third node, with the refused leader as the only
	// candidate.
	other := 6 - self - to
	m.From, m.To, m.FromRank = other, self, election.Rank{}
	m.Candidates = []election.Rank{election.Member{ID: to}.Rank()}
	var adopted, after election.NodeID
	if err := f.do(context.Background(), func() error {
		f.stepNamed(transport.Inbound{Msg: m})
		adopted = follows()
		f.namedPeerGone(to)
		after = follows()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if adopted != to {
		t.Fatalf("node %d's round came back naming node %d; it follows %d (the test's premise failed)", self, to, adopted)
	}
	if after == to {
		t.Errorf("node %d adopted node %d from its round after a refusal of it, and still follows it after the next refusal", self, to)
	}
}
