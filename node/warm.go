package node

import (
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
)

// Warm links: the peer connections a node keeps open while the cluster is
// idle, so that a leader's crash is not answered by a burst of new ones.
//
// Both algorithms elect the highest-ranked live member: after the leader's
// crash that is its heir, the highest-ranked member other than the leader.
// The heir then announces itself to every member, and every follower then
// opens its own connection to it (to heartbeat it, and to see its crash as
// a dropped connection). Opened at the crash, that is a connection to dial
// and an HTTP/2 handshake for each member on both sides, and the heir's
// process does its half of all of them (it dials every one and accepts
// every one) while every other process competes with it for the CPU. At
// 128 processes on two cores the heir's announcements, made over new
// connections, all ran out their 500 ms deadline together.
//
// So, once a leadership has been settled for a while (see keepWarm):
//   - the heir keeps a connection open to every live member;
//   - every other follower keeps one open to the heir, as to its leader.
//
// An idle connection costs no CPU (no keepalive pings) but is closed by the
// peer's server after idle-timeout (5 minutes by default); the next check
// opens it again. The heir holds as many connections as a leader does; any
// other member holds one more. A member that stops being the heir (or a
// follower whose heir changes) opens nothing more, and what it held is
// closed by the peer's idle timeout.

// warmEvery is how often the loop checks that the warm links are open.
// Each check is a pass over the members and, at the heir, a cheap look at
// each link; a link the peer's server closed is opened at the next check.
const warmEvery = time.Second

// warmBatch is how many warm links one check opens at most: a new heir
// opens its links to 127 members over four seconds, not in one burst.
const warmBatch = 32

// warmSettle is how many heartbeat timeouts a leadership must have lasted
// before a node opens its warm links (6 s at the defaults), and warmSpread
// the range of each node's random delay on top of it (see keepWarm).
const (
	warmSettle = 10
	warmSpread = 2 * time.Second
)

// keepWarm opens up to warmBatch warm links that are not open, at most once
// every warmEvery, and only once the leadership this node follows has been
// settled for warmSettle heartbeat timeouts and this node's own delay
// (warmDelay, up to warmSpread). Right after an election or a failover the
// cluster is at its busiest: a new leader answers the first heartbeats of
// every follower over their new connections, and links opened then would
// add to that load (at 128 processes, every follower dialing the new heir
// while the heir dialed every member). Opened later, they cost the idle
// cluster a few handshakes spread over seconds; a crash within the first
// seconds of a leadership finds them as before this rule, not yet open.
func (n *Node) keepWarm(now time.Time) {
	c, ok := n.cfg.Transport.(transport.Connector)
	if !ok || n.halted() || now.Before(n.warmNext) {
		return
	}
	n.warmNext = now.Add(warmEvery)
	if now.Sub(n.since) < warmSettle*n.cfg.HeartbeatTimeout+n.warmDelay {
		return
	}
	opened := 0
	for _, id := range n.warmTargets() {
		if opened == warmBatch {
			return
		}
		if c.Connect(id) {
			opened++
		}
	}
}

// warmTargets is the members this node keeps a connection open to (see
// the top of this file): every live member at the heir, the heir at any
// other follower, none while it leads or knows no leader.
func (n *Node) warmTargets() []election.NodeID {
	st := n.sm.Status()
	if st.Role != election.RoleFollower || st.Leader == 0 || st.Leader == n.cfg.Self.ID {
		return nil
	}
	heir := election.Rank{Priority: n.cfg.Self.Priority, ID: n.cfg.Self.ID}
	for id, rec := range n.members {
		if r := (election.Rank{Priority: rec.Priority, ID: id}); rec.alive && id != st.Leader && heir.Less(r) {
			heir = r
		}
	}
	if heir.ID != n.cfg.Self.ID {
		return []election.NodeID{heir.ID}
	}
	ids := make([]election.NodeID, 0, len(n.members))
	for id, rec := range n.members {
		if rec.alive {
			ids = append(ids, id)
		}
	}
	return ids
}
