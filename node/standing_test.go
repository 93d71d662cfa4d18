package node

import (
	"context"
	"testing"
	"time"
)

// A node whose candidate probe fails hands its leadership over and never
// leads while it fails, not even when the node that took over dies; a
// revive keeps it out; when the probe passes it stands again without
// disturbing the sitting leader.
func TestNodeNotStandingWhileProbeFails(t *testing.T) {
	for _, algo := range []string{"ring", "bully"} {
		t.Run(algo, func(t *testing.T) {
			c := newCluster(t, algo, 3)
			c.agree(5*time.Second, 3)
			ctx := context.Background()
			fail := CandidateProbeInfo{URL: "http://app", LastError: "connection refused", Since: time.Now()}
			if err := c.nodes[3].CandidateProbed(ctx, fail); err != nil {
				t.Fatal(err)
			}
			c.agree(5*time.Second, 2)
			led := c.nodes[3].Subscribe() // every leadership node 3 shows from now on
			defer led.Close()
			st := c.nodes[3].Status()
			if st.Standing || st.CandidateProbe == nil || st.CandidateProbe.OK || st.CandidateProbe.LastError != "connection refused" {
				t.Fatalf("node 3's status does not say it stands down: %+v", st)
			}
			if !c.nodes[3].in.refusing.Load() {
				t.Fatal("a node that does not stand must refuse Elections, so that campaigns skip it at once")
			}

			// Its machine is rebuilt on a revive: still not standing.
			if err := c.nodes[3].Kill(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.nodes[3].Revive(ctx); err != nil {
				t.Fatal(err)
			}
			c.agree(5*time.Second, 2)
			c.stop(2)
			delete(c.nodes, 2)
			li := c.agree(5*time.Second, 1)
			for done := false; !done; {
				select {
				case ev := <-led.C():
					if ev.Self {
						t.Fatalf("node 3 led while its probe failed: %+v", ev)
					}
				default:
					done = true
				}
			}

			pass := CandidateProbeInfo{URL: "http://app", OK: true, Since: time.Now()}
			if err := c.nodes[3].CandidateProbed(ctx, pass); err != nil {
				t.Fatal(err)
			}
			// The status is published after the command, in the same loop pass.
			for deadline := time.Now().Add(5 * time.Second); !c.nodes[3].Status().Standing; {
				if time.Now().After(deadline) {
					t.Fatal("node 3 does not stand after its probe passed")
				}
				time.Sleep(time.Millisecond)
			}
			// Sticky: give a wrong outcome time to show (a heartbeat timeout
			// and more), then node 1 must still lead at the same term.
			time.Sleep(3 * c.nodes[1].cfg.HeartbeatTimeout)
			if li2 := c.agree(5*time.Second, 1); li2.Term != li.Term {
				t.Fatalf("standing again moved the leadership: %v -> %v", li.Term, li2.Term)
			}
		})
	}
}

// A node configured with a candidate probe does not stand before the first
// verdict: alone, it does not lead.
func TestNodeWithProbeStartsNotStanding(t *testing.T) {
	c := newCluster(t, "bully", 0)
	c.expect = 1
	store, err := OpenTermStore("")
	if err != nil {
		t.Fatal(err)
	}
	self := Meta{ID: 1, Name: "n1", PeerAddr: "mem:1"}
	in := NewInbox(0)
	nd, err := New(fast(Config{Self: self, Algorithm: "bully", Store: store, Transport: c.net.Join(1, in), Inbox: in,
		CandidateProbe: "http://app", NewMembership: func() (Membership, error) { return c.hub.join(self), nil }}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go nd.Run(ctx)
	c.nodes[1], c.cancel[1] = nd, cancel
	if st := nd.Status(); st.Standing || st.CandidateProbe == nil {
		t.Fatalf("a node with a probe stands before its first verdict: %+v", st)
	}
	time.Sleep(3 * nd.cfg.HeartbeatTimeout) // what a lone node waits before it campaigns, and more
	if nd.Leader().HasLeader() {
		t.Fatalf("a node that does not stand leads alone: %+v", nd.Leader())
	}
	if err := nd.CandidateProbed(ctx, CandidateProbeInfo{URL: "http://app", OK: true}); err != nil {
		t.Fatal(err)
	}
	c.agree(5*time.Second, 1)
}

// A leader stopping (SIGTERM's handover) hands over to the best-ranked
// member that stands, not to a higher one whose probe fails.
func TestHandoverSkipsANodeThatDoesNotStand(t *testing.T) {
	c := newCluster(t, "bully", 3)
	c.agree(5*time.Second, 3)
	ctx := context.Background()
	if err := c.nodes[3].CandidateProbed(ctx, CandidateProbeInfo{URL: "http://app", LastError: "status 500"}); err != nil {
		t.Fatal(err)
	}
	c.agree(5*time.Second, 2)
	// Node 2 hears node 3 say it does not stand in its next heartbeats.
	time.Sleep(3 * c.nodes[2].cfg.HeartbeatInterval)
	to, err := c.nodes[2].Handover(ctx, 5*time.Second)
	if err != nil || to != 1 {
		t.Fatalf("handover: to %d, %v; want node 1", to, err)
	}
}
