package node

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
)

// peerDown is what the GRPC transport reports when a heartbeat to id was
// refused and a re-dial was refused too.
func peerDown(from, to election.NodeID) (election.Message, error) {
	return election.Message{Type: election.MsgHeartbeat, From: from, To: to},
		fmt.Errorf("%w: %w", transport.ErrPeerDown, io.EOF)
}

// withLeader3 runs f for each algorithm on a 3-node cluster once node 3
// leads.
func withLeader3(t *testing.T, f func(t *testing.T, c *cluster, old LeaderInfo)) {
	for _, algo := range []string{"ring", "bully"} {
		t.Run(algo, func(t *testing.T) {
			c := newCluster(t, algo, 3)
			f(t, c, c.agree(5*time.Second, 3))
		})
	}
}

// A follower told that its leader's host refuses connections campaigns at
// once: the survivors agree well before the heartbeat timeout (250 ms plus
// jitter) would have let them.
func TestNodePeerDownLeaderCampaigns(t *testing.T) {
	withLeader3(t, func(t *testing.T, c *cluster, old LeaderInfo) {
		// Node 3's process is gone as its peers see it: connections to
		// it are refused, and gossip has not noticed (no leave, no
		// death). It keeps running, unheard, outside the agreement.
		c.net.Down(3)
		n3, stop3 := c.nodes[3], c.cancel[3]
		delete(c.nodes, 3)
		delete(c.cancel, 3)
		t.Cleanup(func() { stop3(); <-n3.Done() })
		t0 := time.Now()
		for _, id := range []election.NodeID{1, 2} {
			c.nodes[id].in.Failed(peerDown(id, 3))
		}
		li := c.agree(5*time.Second, 2)
		if took := time.Since(t0); took >= 200*time.Millisecond {
			t.Errorf("the survivors agreed %v after the leader was reported down, want under 200ms", took)
		}
		if li.Term <= old.Term {
			t.Errorf("new term %v not above %v", li.Term, old.Term)
		}
	})
}

// A refused connection to anyone but the leader a follower follows changes
// nothing: not at a follower (about another follower), not at the leader.
func TestNodePeerDownOfNonLeaderIgnored(t *testing.T) {
	withLeader3(t, func(t *testing.T, c *cluster, old LeaderInfo) {
		c.nodes[2].in.Failed(peerDown(2, 1))
		c.nodes[3].in.Failed(peerDown(3, 1))
		c.nodes[3].in.Failed(peerDown(3, 2))
		c.nodes[1].in.Failed(peerDown(1, 2))
		time.Sleep(300 * time.Millisecond) // the window in which a campaign would show
		if li := c.agree(5*time.Second, 3); li.Term != old.Term {
			t.Errorf("the leadership changed: term %v -> %v", old.Term, li.Term)
		}
	})
}

// Handover on the leader transfers to the best-ranked live member, returns
// once it leads, and the old leader never reports itself as the leader
// after Handover began; on a follower it returns at once.
func TestNodeHandover(t *testing.T) {
	withLeader3(t, func(t *testing.T, c *cluster, old LeaderInfo) {
		if to, err := c.nodes[1].Handover(context.Background(), time.Second); to != 0 || err != nil {
			t.Errorf("Handover on a follower: %d, %v; want 0, nil", to, err)
		}
		sub := c.nodes[3].Subscribe()
		defer sub.Close()
		<-sub.C() // the current state
		t0 := time.Now()
		to, err := c.nodes[3].Handover(context.Background(), time.Second)
		if err != nil || to != 2 {
			t.Fatalf("Handover on the leader: %d, %v; want 2, nil", to, err)
		}
		t.Logf("handed over in %v (with the linger)", time.Since(t0).Round(time.Millisecond))
		li := c.agree(time.Second, 2)
		if li.Term <= old.Term {
			t.Errorf("new term %v not above %v", li.Term, old.Term)
		}
		if c.nodes[3].Leader().Self {
			t.Error("the old leader still reports itself as the leader")
		}
		for {
			select {
			case ev := <-sub.C():
				if ev.Self || ev.ID == 3 {
					t.Errorf("after Handover began the old leader published %+v", ev)
				}
				continue
			default:
			}
			break
		}
	})
}

// claimSpy is a node's transport that records, when the node hands a
// TimeoutNow to it, whether the node still claimed leadership.
type claimSpy struct {
	transport.Transport
	node    atomic.Pointer[Node]
	claimed atomic.Int32 // TimeoutNows sent while the node claimed
	sent    atomic.Int32 // TimeoutNows sent
}

func (s *claimSpy) Send(m election.Message) {
	if m.Type == election.MsgTimeoutNow {
		s.sent.Add(1)
		if n := s.node.Load(); n != nil && n.Leader().Self {
			s.claimed.Add(1)
		}
	}
	s.Transport.Send(m)
}

// A leader that hands over stops claiming before its TimeoutNow goes out:
// the node it names leads a few milliseconds later, and until this node's
// loop published its step-down /leader/self answered 200 on both (a
// one-hour chaos run, ring with quorum 5: 0.3 ms of two claims when the
// stepping-down leader's loop was descheduled between the send and the
// publish).
func TestHandoverWithdrawsTheClaimBeforeSending(t *testing.T) {
	for _, algo := range []string{"ring", "bully"} {
		for _, quorum := range []int{0, 3} {
			t.Run(fmt.Sprintf("%s/quorum=%d", algo, quorum), func(t *testing.T) {
				spies := map[election.NodeID]*claimSpy{}
				c := &cluster{t: t, net: transport.NewNetwork(), hub: &gossipHub{members: map[election.NodeID]*fakeGossip{}},
					nodes: map[election.NodeID]*Node{}, cancel: map[election.NodeID]context.CancelFunc{}, dirs: map[election.NodeID]string{},
					algo: algo, quorum: quorum,
					wrap: func(id election.NodeID, tr transport.Transport) transport.Transport {
						s := &claimSpy{Transport: tr}
						spies[id] = s
						return s
					}}
				for i := election.NodeID(1); i <= 3; i++ {
					nd := c.start(i) // creates spies[i]
					spies[i].node.Store(nd)
				}
				t.Cleanup(func() {
					for id := range c.cancel {
						c.stop(id)
					}
				})
				li := c.agree(10*time.Second, 0)
				to, err := c.nodes[li.ID].Handover(context.Background(), 2*time.Second)
				if err != nil || to == 0 {
					t.Fatalf("Handover on leader %d: %d, %v", li.ID, to, err)
				}
				s := spies[li.ID]
				if s.sent.Load() == 0 {
					t.Fatalf("leader %d sent no TimeoutNow", li.ID)
				}
				if n := s.claimed.Load(); n > 0 {
					t.Errorf("leader %d still claimed leadership when %d of its %d TimeoutNows went out", li.ID, n, s.sent.Load())
				}
			})
		}
	}
}
