package node

import (
	"testing"
	"time"
)

// The bound a watcher of a quorum leader is held to: it hears that the node
// stopped claiming within lapseTick of when Leader (what /leader/self
// answers) first says so, plus lapseSlack.
const (
	// lapseTick is the promise: one tick of the nodes' clock (fast: 10 ms),
	// the granularity at which a node tracks its lease.
	lapseTick = 10 * time.Millisecond
	// lapseSlack is what the test allows on top for its own goroutines:
	// the poller of Leader and the subscriber must each get a core of a
	// shared two-core machine, under -race, to note the time of what they
	// saw. 15 ms is one and a half of Linux's default scheduling latency
	// (CFS: 6 ms x 2 cores, rounded up); the lease is 190 ms.
	lapseSlack = 15 * time.Millisecond
)

// TestQuorumWatchHearsTheLapseWhileTheLoopStalls: a quorum leader's loop
// stalls (a command that does not return, as a paused or starved loop)
// past its lease. Its watcher hears that it stopped claiming within a tick
// of when Leader first answers so, not when the loop runs again, and the
// event is Leader's answer; once the loop runs again and the cluster
// agrees, the watcher ends where Leader is.
func TestQuorumWatchHearsTheLapseWhileTheLoopStalls(t *testing.T) {
	for _, algo := range []string{"ring", "bully"} {
		t.Run(algo, func(t *testing.T) {
			c := newQuorumCluster(t, algo, 3, 3, nil)
			li := c.agree(10*time.Second, 0)

			leader := c.nodes[li.ID]
			sub := leader.Subscribe()
			defer sub.Close()
			if first := <-sub.C(); !first.Self || first.Term != li.Term {
				t.Fatalf("leader %d: the first event %+v, want its claim in term %v", li.ID, first, li.Term)
			}
			release := stallLoop(leader)
			released := false
			defer func() {
				if !released {
					release()
				}
			}()
			// Only the loop moves the lease: its end is fixed now.
			end := time.Unix(0, leader.leaseUntil.Load())
			notSelf := make(chan time.Time, 1)
			go func() {
				deadline := time.Now().Add(5 * time.Second)
				for leader.Leader().Self && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond) // polling interval, not a wait for an outcome
				}
				notSelf <- time.Now()
			}()
			var lapse LeaderInfo
			var heard time.Time
			timeout := time.After(2 * time.Second)
			for heard.IsZero() {
				select {
				case ev := <-sub.C():
					if !ev.Self {
						lapse, heard = ev, time.Now()
					}
				case <-timeout:
					t.Fatalf("leader %d: its loop stalled, its lease ended at %s, and 2s later its watcher has heard nothing (Leader: %+v)",
						li.ID, end.Format("15:04:05.000"), leader.Leader())
				}
			}
			answered := <-notSelf
			t.Logf("leader %d: the lease ended at +0; Leader said not-leader at %+v; the watcher heard %s in term %v at %+v",
				li.ID, answered.Sub(end), lapse.State, lapse.Term, heard.Sub(end))
			if late := heard.Sub(answered); late > lapseTick+lapseSlack {
				t.Errorf("leader %d: the watcher heard of the lapse %v after Leader said so; want within a tick (%v) plus %v of slack",
					li.ID, late, lapseTick, lapseSlack)
			}
			if heard.Before(end) {
				t.Errorf("leader %d: the watcher heard of the lapse at %v, before the lease ended", li.ID, heard.Sub(end))
			}
			if want := (LeaderInfo{State: StateNoLeader, Term: li.Term}); lapse != want {
				t.Errorf("leader %d: the lapse event %+v, want %+v (what Leader answers)", li.ID, lapse, want)
			}

			// Running again, the loop may find acknowledgements in its
			// inbox that renew the lease (a claim in the same term again,
			// as Leader makes it too), then steps down or leads on. Once
			// the cluster agrees, the watcher ends where Leader is.
			release()
			released = true
			c.agree(10*time.Second, 0)
			last := lapse
			settled := time.After(5 * time.Second)
			for !sameView(last, leader.Leader()) {
				select {
				case last = <-sub.C():
				case <-settled:
					t.Fatalf("leader %d: its watcher's last event %+v, Leader %+v, 5s after the cluster agreed", li.ID, last, leader.Leader())
				case <-time.After(10 * time.Millisecond): // Leader may have moved without an event still queued; look again
				}
			}
		})
	}
}

// In plain mode there is no lease, and no timer.
func TestPlainModeHasNoLeaseTimer(t *testing.T) {
	c := newCluster(t, "bully", 3)
	c.agree(5*time.Second, 3)
	for id, n := range c.nodes {
		n.ann.mu.Lock()
		timer := n.ann.timer
		n.ann.mu.Unlock()
		if timer != nil {
			t.Errorf("node %d runs a lease timer in plain mode", id)
		}
	}
}
