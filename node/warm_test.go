package node

import (
	"testing"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
)

// Once a leadership is settled, the heir (the highest-ranked member after
// the leader) keeps a connection open to every other member, and every
// other follower keeps one open to the heir: a leader's crash then needs no
// new connection for the heir's announcements, nor for the followers'
// heartbeats to it (warm.go).
func TestHeirAndFollowersKeepWarmLinks(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			c, recs := newConnectCluster(t, algo, 4)
			li := c.agree(5*time.Second, 4)
			// Node 3 is the heir: it connects to 1 and 2; they connect to 3.
			want := map[election.NodeID][]election.NodeID{3: {1, 2}, 1: {3}, 2: {3}}
			for id, targets := range want {
				seen := map[election.NodeID]bool{}
				deadline := time.After(10 * time.Second)
				for _, to := range targets {
					for !seen[to] {
						select {
						case got := <-recs[id].connected:
							seen[got] = true
						case <-deadline:
							t.Fatalf("node %d (leader %d) connected to %v, not to %d, within 10 s", id, li.ID, seen, to)
						}
					}
				}
			}
		})
	}
}

// A node connects to no member beyond its leader while it leads, and the
// heir is the highest-ranked live member other than the leader: priority
// first, then id; a member gossip declared gone is not one.
func TestWarmTargets(t *testing.T) {
	n := &Node{cfg: Config{Self: Meta{ID: 2}}, members: map[election.NodeID]*memberRec{
		1: {Meta: Meta{ID: 1}, alive: true},
		3: {Meta: Meta{ID: 3}, alive: true},
		4: {Meta: Meta{ID: 4, Priority: -1}, alive: true},
		5: {Meta: Meta{ID: 5}, alive: false},
	}}
	for _, tc := range []struct {
		role   election.Role
		leader election.NodeID
		want   []election.NodeID
	}{
		{election.RoleFollower, 3, []election.NodeID{1, 3, 4}}, // the heir: every live member
		{election.RoleFollower, 1, []election.NodeID{3}},       // 3 outranks this node
		{election.RoleFollower, 4, []election.NodeID{3}},
		{election.RoleLeader, 2, nil},
		{election.RoleNoLeader, 0, nil},
	} {
		n.sm = statusOnly{st: election.Status{Role: tc.role, Leader: tc.leader}}
		got := n.warmTargets()
		if !sameIDs(got, tc.want) {
			t.Errorf("role %v, leader %d: warm links to %v, want %v", tc.role, tc.leader, got, tc.want)
		}
	}
}

// statusOnly is a state machine that only answers Status.
type statusOnly struct {
	election.StateMachine
	st election.Status
}

func (s statusOnly) Status() election.Status { return s.st }

func sameIDs(a, b []election.NodeID) bool {
	if len(a) != len(b) {
		return false
	}
	in := map[election.NodeID]bool{}
	for _, id := range a {
		in[id] = true
	}
	for _, id := range b {
		if !in[id] {
			return false
		}
	}
	return true
}

// countingConnector is a transport whose Connect opens each link once.
type countingConnector struct {
	transport.Transport
	open map[election.NodeID]bool
}

func (c countingConnector) Connect(id election.NodeID) bool {
	if c.open[id] {
		return false
	}
	c.open[id] = true
	return true
}

// The heir opens its links warmBatch at a time, one batch a check, and none
// before its leadership has been settled for warmSettle heartbeat timeouts
// and its own delay.
func TestWarmLinksOpenInBatches(t *testing.T) {
	conn := countingConnector{open: map[election.NodeID]bool{}}
	n := &Node{cfg: Config{Self: Meta{ID: 100}, Transport: conn, HeartbeatTimeout: 100 * time.Millisecond},
		members: map[election.NodeID]*memberRec{}, warmDelay: time.Second}
	for id := election.NodeID(1); id < 100; id++ {
		n.members[id] = &memberRec{Meta: Meta{ID: id}, alive: true}
	}
	n.members[101] = &memberRec{Meta: Meta{ID: 101}, alive: true}
	n.sm = statusOnly{st: election.Status{Role: election.RoleFollower, Leader: 101}}
	now := time.Now()
	n.since = now
	n.keepWarm(now.Add(1900 * time.Millisecond))
	if len(conn.open) != 0 {
		t.Fatalf("opened %d links 1.9 s after the leadership settled, before ten timeouts and its delay (2 s)", len(conn.open))
	}
	for i, want := range []int{warmBatch, 2 * warmBatch, 3 * warmBatch, 100} {
		n.keepWarm(now.Add(2*time.Second + time.Duration(i+1)*warmEvery))
		if len(conn.open) != want {
			t.Fatalf("check %d: %d links open, want %d", i+1, len(conn.open), want)
		}
	}
}
