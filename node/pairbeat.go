package node

import (
	"time"

	"github.com/electord/electord/election"
)

// A heartbeat per pair of nodes for the named elections (plain mode). A node
// that follows a peer in thousands of elections would otherwise heartbeat
// it once per election and interval, each answered. Instead a node that
// runs a named machine sends every live member its incarnation (a Candidacy
// of no election) once a heartbeat interval, and vouches for a member (election.Config.Vouched)
// once it has heard from it steadily, anything at all with no gap of a
// heartbeat timeout, for a heartbeat timeout. Time here is the named
// clock's ticks, which a loop that stalled (a pause, a starved process)
// does not count: the clock drops the ticks it missed, so the node does not
// take its own stall for its peers' silence and time out every leader
// before it reads what they sent meanwhile. For the same reason the stall
// is found by the wall clock, as beats late (afterStall). The machines that follow a
// vouched member keep quiet (election/quiet.go). The node stops vouching
// when the member falls silent for a heartbeat timeout (its followers then
// time it out, as their own timers would have), restarts (a new
// incarnation), leaves, dies, or refuses connections.
//
// A change of the answer is made between the ticks the machines apply at
// once (named_lazy.go): the machines that follow the member are brought up
// to date under the old answer first, and count their due ticks again
// under the new one. Quorum mode keeps each election's heartbeats (a
// lease counts them), and sends no pair heartbeats.

// pairBeats is the node's pair heartbeat state, owned by the loop.
type pairBeats struct {
	every int  // ticks between beats; 0 until the named clock first starts
	left  int  // ticks until the next beat
	due   bool // a beat fell due; beatPairs sends it
	// beatWall: when the last beat was sent (or the clock started, or a
	// stall was found), by the wall clock: the named clock's ticks do not
	// count a stall.
	beatWall time.Time
	peers    map[election.NodeID]*pairPeer
	// longestStall is the longest stall afterStall found (kept for the
	// tests that must tell the stall they made from the host's).
	longestStall time.Duration
}

// pairPeer is what the node keeps of one member's pair heartbeat.
type pairPeer struct {
	since, last uint64 // the named clock's ticks at the first and the last message of the current run, no gap a heartbeat timeout
	vouched     bool
}

// vouches answers election.Config.Vouched for every named machine.
func (s *namedState) vouches(id election.NodeID) bool {
	p := s.pairs.peers[id]
	return p != nil && p.vouched
}

// pairHeard records a message from member id, and vouches for the member
// once it has been heard steadily for a heartbeat timeout. The table is
// kept while the named clock runs (it starts empty with it).
func (n *Node) pairHeard(id election.NodeID) {
	if n.named.clock == nil {
		return
	}
	n.catchUpNamed()
	n.afterStall()
	ps, now, timeout := &n.named.pairs, n.named.ticks, n.pairTimeout()
	if ps.peers == nil {
		ps.peers = map[election.NodeID]*pairPeer{}
	}
	p := ps.peers[id]
	if p == nil {
		p = &pairPeer{since: now, last: now}
		ps.peers[id] = p
	}
	if now-p.last > timeout {
		// A gap the beat did not see yet: a new run. The member speaks, so
		// its followers are not told it fell silent; they follow it by
		// their own heartbeats until it is vouched for again.
		n.unvouch(id, false)
		p.since = now
	}
	p.last = now
	if !p.vouched && now-p.since >= timeout && !n.namedQuorum() && !n.halted() {
		n.setVouched(id, true)
	}
}

// afterStall runs when the loop finds its beats two intervals late or more
// by the wall clock: it stood still (or one pass took that long). Every
// peer counts as heard now (what they sent meanwhile waits in the inbox;
// one really silent is found a timeout later). If it stood still longer
// than a heartbeat timeout, its members may have found the pair silent,
// timed it out and campaigned or followed another, and the heartbeats they
// sent before, read now, say nothing of that: its leaders are told
// (EventStalled), and each tells every member who leads at its next round.
// Counted on, those heartbeats kept a paused ring leader silent for a quiet
// interval after it resumed, while members that had campaigned waited for
// a round that had ended in the paused node. A shorter stall (a long pass
// in a mass failover) went unseen by the members: no announcement.
func (n *Node) afterStall() {
	ps, now := &n.named.pairs, n.named.ticks
	if ps.every == 0 {
		return
	}
	stood := time.Since(ps.beatWall)
	if stood <= 2*time.Duration(ps.every)*n.cfg.Tick {
		return
	}
	ps.longestStall = max(ps.longestStall, stood)
	for _, p := range ps.peers {
		p.last = now
	}
	ps.beatWall = time.Now()
	if stood <= n.cfg.HeartbeatTimeout {
		return
	}
	for name, nm := range n.named.machines {
		if nm.sm.Status().Role != election.RoleLeader {
			continue
		}
		nm.sm.Observe(election.Event{Type: election.EventStalled})
		n.named.recount(name)
	}
}

// pairTimeout is the heartbeat timeout in named ticks.
func (n *Node) pairTimeout() uint64 { return uint64(ticks(n.cfg.HeartbeatTimeout, n.cfg.Tick)) }

// unvouch stops vouching for member id; silent: it fell silent, and the
// machines that follow it time it out.
func (n *Node) unvouch(id election.NodeID, silent bool) {
	p := n.named.pairs.peers[id]
	if p == nil || !p.vouched {
		return
	}
	followers := n.setVouched(id, false)
	if !silent || n.halted() {
		return
	}
	n.timeOutLeader(followers)
}

// forgetPair drops what the node keeps of member id's pair heartbeat (it
// left, died, or a new process of it announced itself): it is vouched for
// again only after a heartbeat timeout of messages.
func (n *Node) forgetPair(id election.NodeID) {
	n.unvouch(id, false)
	delete(n.named.pairs.peers, id)
	delete(n.named.resend.digesters, id) // a new process may be an older node: a round each period until it sends a digest
}

// setVouched changes the answer about member id between applied ticks (see
// the top of this file), and returns the elections whose machines follow
// it. The machines that follow it keep quiet or not by the answer, and
// those that lead time their rounds by it: both count their due ticks
// again.
func (n *Node) setVouched(id election.NodeID, on bool) []string {
	n.catchUpNamed()
	var followers, leaders []string
	for name, nm := range n.named.machines {
		switch st := nm.sm.Status(); { // Status applies the missed ticks
		case st.Role == election.RoleFollower && st.Leader == id:
			followers = append(followers, name)
		case st.Role == election.RoleLeader:
			leaders = append(leaders, name)
		}
	}
	n.named.pairs.peers[id].vouched = on
	ev := election.Event{Type: election.EventUnvouched, Member: election.Member{ID: id}}
	if on {
		ev.Type = election.EventVouched
	}
	for _, name := range leaders {
		n.named.machines[name].sm.Observe(ev)
		n.named.recount(name)
	}
	for _, name := range followers {
		n.named.recount(name)
	}
	return followers
}

// beatPairs runs after each loop pass: when a beat fell due, it sends this
// node's incarnation to every live member, and stops vouching for the
// members silent for a heartbeat timeout. A node that runs no machine (its
// clock runs for the candidacies it holds) sends no beat: it leads nothing
// a member could follow on its word.
func (n *Node) beatPairs() {
	ps := &n.named.pairs
	if !ps.due {
		return
	}
	ps.due = false
	if n.namedQuorum() || n.halted() {
		return
	}
	if len(n.named.machines) > 0 {
		n.announceIncarnation(0)
	}
	n.catchUpNamed()
	n.afterStall()
	ps.beatWall = time.Now()
	for id, p := range ps.peers {
		if p.vouched && n.named.ticks-p.last > n.pairTimeout() {
			n.unvouch(id, true)
		}
	}
}

// onBeat is the first tick at or after at (a tick after now) on which a
// beat falls. A quiet follower's one timer, its quiet heartbeat, is due on
// it (scheduleDue), so the quiet heartbeats of all the elections that fall
// due within an interval leave with the pair's beat in one loop pass, and
// reach each peer as one call, and the leaders' answers as one, instead of
// one call each way per election (at rest at 2,000 elections this halved a
// node's CPU, docs/bench/HISTORY.md). A quiet
// heartbeat checks only that the leader still holds what the follower
// follows, once a quiet interval; sent up to an interval late, it checks
// the same.
func (ps *pairBeats) onBeat(now, at uint64) uint64 {
	if ps.every == 0 {
		return at
	}
	next, every := now+uint64(max(ps.left, 1)), uint64(ps.every)
	if at <= next {
		return next
	}
	return next + (at-next+every-1)/every*every
}

// tick counts the named clock's tick toward the next beat.
func (ps *pairBeats) tick() {
	if ps.every == 0 {
		return
	}
	if ps.left--; ps.left <= 0 {
		ps.left, ps.due = ps.every, true
	}
}
