package election

import (
	"errors"
	"fmt"
	"slices"
)

// core is the state machine shared by every strategy: terms, leadership,
// heartbeats, the quorum lease, resign and transfer. The Algorithm decides
// how an election runs, acting through the Host view of the core (host).
type core struct {
	cfg      Config
	algo     Algorithm
	observer CoordinatorObserver // algo, when it implements it
	checker  MessageChecker      // algo, when it implements it
	self     Rank

	term       Term // the highest term seen; persisted
	leaderTerm Term // the term of the leadership this node believes in
	leader     NodeID
	role       Role

	members map[NodeID]Member // live members, self excluded
	ring    []Rank            // live members and self, sorted by rank; nil when stale

	now        uint64
	sinceAck   int // follower: ticks since the leader last confirmed
	hbElapsed  int
	suspectAt  int  // follower: this round's leader timeout, jitter included
	idle       int  // no leader: ticks waited
	idleWait   int  // no leader: ticks to wait before campaigning
	coldRanked bool // the first election's rank-ordered wait was taken (tickNoLeader)
	excludeEnd uint64

	lastHeard map[NodeID]uint64 // leader: when each follower was last heard
	leaseFrom uint64            // leader: when it started leading

	// Quorum mode leases (see docs/ALGORITHMS.md, "Quorum mode"). A leader
	// counts member m towards its lease until support[m]+LeaseTicks, where
	// support[m] is a tick of its own clock before m promised not to
	// support anyone else; a follower keeps that promise until promiseEnd.
	support    map[NodeID]uint64
	proposedAt uint64 // the tick this node's proposal went out
	promisedTo NodeID
	promiseEnd uint64
	lastStamp  uint64 // follower: the last stamp its leader sent, echoed in heartbeats
	askedAt    uint64 // follower: the tick (plus one) of the last out-of-turn heartbeat (askLeader)

	proposal     Term // quorum mode: the term this node waits for acks on
	acks         map[NodeID]bool
	proposalAge  int
	tentative    NodeID // quorum mode: an unconfirmed leader we acked
	resigned     NodeID // a leader that resigned and handed this node the election
	tentativeFor Term

	// bootstrapping: a first start still waiting for BootstrapExpect
	// members before campaigning on its own.
	bootstrapping bool
	// handingEnd: this former leader transferred its leadership and keeps
	// acknowledging its old term until this tick (0: no transfer pending;
	// cleared when a new leadership settles).
	handingEnd uint64

	msgs         []Message
	persist      bool
	savedLeader  Term // the leaderTerm last handed out to persist
	reported     Leadership
	rejected     uint64
	refusedTerms uint64
	// refusedMembership counts messages refused by the membership checks.
	refusedMembership uint64
}

var (
	_ StateMachine = (*core)(nil)
	_ Host         = (*host)(nil)
)

// New builds a node's state machine that elects with algo. Algorithm
// packages call it from their own constructors.
func New(cfg Config, algo Algorithm) (StateMachine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &core{
		cfg:  cfg,
		algo: algo,
		self: Rank{Priority: cfg.Priority, ID: cfg.ID},
		term: cfg.Term,
		// The last leadership known before a restart: reported while no
		// leader is known, and no older leadership is followed.
		leaderTerm:  cfg.LeaderTerm,
		savedLeader: cfg.LeaderTerm,
		members:     make(map[NodeID]Member, len(cfg.Peers)),
		lastHeard:   map[NodeID]uint64{},
		support:     map[NodeID]uint64{},
	}
	for _, p := range cfg.Peers {
		c.members[p.ID] = p
	}
	c.reported = c.leadership() // a restart's known leadership is no change
	c.observer, _ = algo.(CoordinatorObserver)
	c.checker, _ = algo.(MessageChecker)
	c.bootstrapping = cfg.Term == 0 && cfg.BootstrapExpect > 1
	// Wait a leader timeout, plus jitter, to learn of a sitting leader before
	// campaigning.
	c.idleWait = cfg.LeaderTimeoutTicks + c.jitter()
	return c, nil
}

// ---- views ----

// excluded reports whether this node resigned or handed over and must not
// stand in the current round.
func (c *core) excluded() bool { return c.excludeEnd != 0 }

// majority is the number of nodes a quorum needs, or 0 outside quorum mode.
func (c *core) majority() int { return c.cfg.Majority() }

// ringView is the live members and this node sorted by rank, lowest first.
func (c *core) ringView() []Rank {
	if c.ring == nil {
		c.ring = make([]Rank, 0, len(c.members)+1)
		c.ring = append(c.ring, c.self)
		for _, m := range c.members {
			c.ring = append(c.ring, m.Rank())
		}
		slices.SortFunc(c.ring, Rank.Compare)
	}
	return c.ring
}

func (c *core) successor(r Rank) Rank {
	ring := c.ringView()
	i, found := slices.BinarySearchFunc(ring, r, Rank.Compare)
	if found {
		i++
	}
	if i >= len(ring) {
		i = 0
	}
	return ring[i]
}

func (c *core) rankOf(id NodeID) (Rank, bool) {
	if id == c.cfg.ID {
		return c.self, true
	}
	m, ok := c.members[id]
	return m.Rank(), ok
}

func (c *core) jitter() int { return c.cfg.Rand(c.cfg.JitterTicks + 1) }

// leaderFresh: this node follows a leader that answered within half a
// leader timeout.
func (c *core) leaderFresh() bool {
	return c.role == RoleFollower && c.sinceAck <= c.cfg.LeaderTimeoutTicks/2
}

func (c *core) standing() Standing {
	return Standing{
		Role: c.role, Leader: c.leader, LeaderTerm: c.leaderTerm, Term: c.term,
		LeaderFresh: c.leaderFresh(),
		Proposing:   c.proposal != 0,
		Excluded:    c.excluded(),
		Resigned:    c.resigned,
	}
}

// ---- effects ----

func (c *core) send(m Message) {
	if !c.usable(m.Term) || !c.usable(m.MaxTerm) {
		return // the term space is exhausted; see usable
	}
	m.From = c.cfg.ID
	if m.Type == MsgCoordinator && m.Confirmed && m.Leader == c.cfg.ID && c.role == RoleLeader && c.majority() > 1 {
		// Quorum mode: the leader's own announcement asks for a promise,
		// like its heartbeat answers, so a new leadership renews its lease
		// one round trip sooner.
		m.Stamp = c.now + 1
	}
	c.msgs = append(c.msgs, m)
}

// usable reports whether t may be sent, led or followed: its epoch is at
// most MaxEpoch. Peers' terms beyond it are refused when checked; a term
// this node derives beyond it (NextTerm at the end of the term space, 2^40
// epochs) is dropped and counted, and the node takes no part in elections
// any more: it cannot lead, and says so in Status.RefusedTerms.
func (c *core) usable(t Term) bool {
	if t.InRange() {
		return true
	}
	c.refusedTerms++
	return false
}

// observeTerm raises the highest term seen.
func (c *core) observeTerm(t Term) {
	if t > c.term {
		c.term = t
		c.persist = true
	}
}

func (c *core) newAttempt() Term {
	c.observeTerm(NextTerm(c.term, c.cfg.ID))
	if c.role != RoleLeader {
		c.role, c.leader = RoleElecting, 0
	}
	return c.term
}

func (c *core) win(t Term) {
	if !c.usable(t) {
		return
	}
	c.observeTerm(t)
	if c.majority() <= 1 {
		c.becomeLeader(t)
		c.broadcast(Message{Type: MsgCoordinator, Term: t, Leader: c.cfg.ID, Confirmed: true})
		return
	}
	c.propose(t)
}

// propose (quorum mode) asks every member to acknowledge this node as the
// leader of term t; it leads once a majority did. A node that still keeps a
// promise to another leader does not stand until the promise ends.
func (c *core) propose(t Term) {
	if !c.usable(t) {
		return
	}
	if c.promised() && c.promisedTo != c.cfg.ID {
		c.noLeader(int(c.promiseEnd - c.now))
		return
	}
	c.role, c.leader = RoleElecting, 0
	c.proposal, c.proposalAge, c.proposedAt = t, 0, c.now
	c.acks = map[NodeID]bool{}
	c.broadcast(Message{Type: MsgCoordinator, Term: t, Leader: c.cfg.ID})
}

// takeStamp (quorum mode): a stamp from the leader this node follows binds
// it by a promise, and is echoed in its next heartbeat.
func (c *core) takeStamp(m Message) {
	if m.Stamp != 0 && m.From == c.leader && c.role == RoleFollower && c.majority() > 1 {
		c.promise(m.From)
		c.lastStamp = m.Stamp
	}
}

// promised reports whether this node still keeps a promise (quorum mode).
func (c *core) promised() bool { return c.now < c.promiseEnd }

// promise (quorum mode) binds this node not to support anyone but to until
// PromiseTicks from now.
func (c *core) promise(to NodeID) {
	c.promisedTo, c.promiseEnd = to, c.now+uint64(c.cfg.PromiseTicks())
}

// release frees this node of its promise to from, which stepped down.
func (c *core) release(from NodeID) {
	if c.promisedTo == from {
		c.promiseEnd = 0
	}
}

// keepsLeader (quorum mode) reports whether this node is bound to the
// leadership it is in: it leads and its lease holds, or it follows a leader
// to which it keeps a promise (that leader's own word reached it within
// PromiseTicks). The leadership counts a majority now, so no rival can
// gather one: like a Raft node "in lease" under check-quorum, such a node
// gives a rival's campaign no help (refuseRival).
func (c *core) keepsLeader() bool {
	if c.majority() <= 1 {
		return false
	}
	switch c.role {
	case RoleLeader:
		return c.now < c.leaseEnd()
	case RoleFollower:
		return c.promised() && c.promisedTo == c.leader
	}
	return false
}

// refuseRival (quorum mode) answers a rival's campaign that reached a node
// bound to its leadership (keepsLeader): an Election at a term above that
// leadership, or a round's announcement passed on by another node. The
// campaign would depose the leader without its word; it is not passed on,
// its term is not taken, and no one steps down. The answer names the
// leadership, as the refusal of a rival's proposal does: a leader sends its
// own announcement, which the campaigner (a follower back from isolation)
// follows at once at the same term; a follower names its leader, which the
// campaigner then asks, and asks that leader too.
func (c *core) refuseRival(to NodeID) {
	if to == 0 || to == c.cfg.ID {
		return
	}
	if c.role == RoleLeader {
		c.send(Message{Type: MsgCoordinator, To: to, Term: c.leaderTerm, Leader: c.cfg.ID, Confirmed: true})
		return
	}
	c.send(Message{Type: MsgHeartbeatResp, To: to, Term: c.leaderTerm, Leader: c.leader, Reject: true})
	// The campaigner lost that leader, and this node may not have noticed
	// yet: ask it now, not at the next heartbeat (Host.AskLeader).
	c.askLeader()
}

// stepDown (quorum mode) tells every member that this node no longer
// claims leadership, so they need not keep their promises to it.
func (c *core) stepDown() {
	if c.majority() > 1 {
		c.broadcast(Message{Type: MsgHeartbeatResp, Term: c.leaderTerm, Release: true})
	}
}

// follow makes this node a follower of leader at term t.
func (c *core) follow(leader NodeID, t Term) {
	if !c.usable(t) {
		return
	}
	if t < c.leaderTerm {
		// Never back to an older leadership than one this node knew (and
		// may have reported): callers only pass newer terms; this guards.
		c.rejected++
		return
	}
	c.observeTerm(t)
	if leader != c.leader || t != c.leaderTerm {
		c.lastStamp = 0 // stamps are only good for the leadership that gave them
	}
	c.leader, c.leaderTerm, c.role = leader, t, RoleFollower
	c.sinceAck, c.hbElapsed = 0, 0
	c.suspectAt = c.cfg.LeaderTimeoutTicks + c.jitter()
	c.settled()
}

// becomeLeader makes this node lead at term t, which it must own.
func (c *core) becomeLeader(t Term) {
	if !c.usable(t) {
		return
	}
	if !t.OwnedBy(c.cfg.ID) {
		panic(fmt.Sprintf("election: node %d cannot lead in term %v", c.cfg.ID, t))
	}
	c.observeTerm(t)
	if c.role != RoleLeader {
		c.lastHeard = make(map[NodeID]uint64, len(c.members))
		c.support = make(map[NodeID]uint64, len(c.members))
		c.leaseFrom = c.now
	}
	c.role, c.leader, c.leaderTerm = RoleLeader, c.cfg.ID, t
	for id := range c.acks {
		c.lastHeard[id] = c.now
		// Each ack was sent after the proposal went out, and with it a promise.
		c.support[id] = max(c.support[id], c.proposedAt)
	}
	c.excludeEnd = 0
	c.settled()
}

// settled clears election state once a leadership is settled.
func (c *core) settled() {
	c.bootstrapping, c.handingEnd = false, 0
	c.proposal, c.acks, c.tentative, c.resigned = 0, nil, 0, 0
	if c.leader != c.cfg.ID {
		c.excludeEnd = 0
	}
	c.algo.Reset()
}

// giveUp makes this node leaderless after a failed round (too few
// candidates, a proposal without a majority, a lost lease): it campaigns
// again after a leader timeout plus jitter, not at once, so a minority does
// not spin through terms.
func (c *core) giveUp() { c.noLeader(c.cfg.LeaderTimeoutTicks + c.jitter()) }

func (c *core) noLeader(wait int) {
	c.role, c.leader = RoleNoLeader, 0
	c.proposal, c.acks = 0, nil
	c.idle, c.idleWait = 0, wait
}

func (c *core) broadcast(m Message) {
	for _, r := range c.ringView() {
		if r.ID != c.cfg.ID {
			m.To = r.ID
			c.send(m)
		}
	}
}

// hearsay (quorum mode) handles a leadership at term t heard second-hand:
// from a node other than its leader. This node asks the leader itself and
// follows only on its word (its announcement or its answer): a node that
// cannot reach the leader (a bridge, a one-way cut) must not name it, since
// no heartbeat of its own could confirm it, and a minority names no leader.
// A leader or follower of an older leadership stops naming it.
func (c *core) hearsay(leader NodeID, t Term) {
	c.observeTerm(t)
	switch c.role {
	case RoleLeader:
		c.stepDown()
		c.giveUp()
	case RoleFollower:
		c.giveUp()
	}
	c.send(Message{Type: MsgHeartbeat, To: leader, Term: t, Leader: 0})
}

// ---- StateMachine ----

// Step implements StateMachine.
func (c *core) Step(m Message) error {
	if err := c.validate(m); err != nil {
		c.rejected++
		switch {
		case errors.Is(err, ErrTermRange):
			c.refusedTerms++
		case errors.Is(err, ErrNotMember), errors.Is(err, ErrNotLeaderMsg):
			c.refusedMembership++
		}
		return err
	}
	switch m.Type {
	case MsgHeartbeat:
		c.stepHeartbeat(m)
	case MsgHeartbeatResp:
		c.stepHeartbeatResp(m)
	case MsgCoordinator:
		c.stepCoordinator(m)
	case MsgCoordinatorAck:
		c.stepAck(m)
	case MsgTimeoutNow:
		c.stepTimeoutNow(m)
	case MsgElection, MsgAnswer:
		if m.Type == MsgElection && m.Term > c.leaderTerm && m.Initiator != c.leader && m.Initiator != c.cfg.ID && c.keepsLeader() {
			c.refuseRival(m.Initiator) // quorum mode: see refuseRival
			return nil
		}
		c.observeTerm(m.Term)
		c.algo.Step(c.host(), m)
	}
	return nil
}

func (c *core) validate(m Message) error {
	if err := CheckMessage(m, c.cfg.ID); err != nil {
		return err
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %v from %d: %s", ErrInvalidMessage, m.Type, m.From, fmt.Sprintf(format, a...))
	}
	if m.From == c.cfg.ID {
		return bad("claims to come from this node")
	}
	if r, ok := c.members[m.From]; ok && m.FromRank != (Rank{}) && m.FromRank != r.Rank() {
		return bad("claims rank %v, membership says %v", m.FromRank, r.Rank())
	}
	if m.Type == MsgCoordinator && (m.Leader == 0 || !m.Term.OwnedBy(m.Leader)) {
		return bad("leader %d does not own term %v", m.Leader, m.Term)
	}
	// Checked against membership (issue 12): only live members take part,
	// and only a live member (or this node) can be announced as leader.
	// Rank comes from membership, never from the message.
	if _, ok := c.members[m.From]; !ok {
		return fmt.Errorf("%w: %w", bad("%d is not a live member", m.From), ErrNotMember)
	}
	if m.Type == MsgCoordinator && m.Leader != c.cfg.ID {
		if _, ok := c.members[m.Leader]; !ok {
			return fmt.Errorf("%w: %w", bad("names leader %d, not a live member", m.Leader), ErrNotMember)
		}
	}
	if m.Type == MsgTimeoutNow && (m.From != c.leader || m.Term != c.leaderTerm) {
		// Only the leader this node follows may hand it its leadership or
		// ask it to run the election it resigned from.
		return fmt.Errorf("%w: %w", bad("from %d at %v, but this node follows %d at %v", m.From, m.Term, c.leader, c.leaderTerm), ErrNotLeaderMsg)
	}
	if c.checker != nil && (m.Type == MsgElection || m.Type == MsgAnswer) {
		if reason := c.checker.CheckMessage(c.host(), m); reason != "" {
			return bad("%s", reason)
		}
	}
	return nil
}

func (c *core) stepHeartbeat(m Message) {
	if c.role == RoleLeader && m.Term == c.leaderTerm && m.Leader == c.cfg.ID {
		c.lastHeard[m.From] = c.now
		resp := Message{Type: MsgHeartbeatResp, To: m.From, Term: c.leaderTerm, Leader: c.cfg.ID}
		if c.majority() > 1 {
			// The echo of a stamp this leadership gave (never one from the
			// future) dates the follower's promise: count it from then.
			if at := m.Stamp - 1; m.Stamp != 0 && at >= c.leaseFrom && at <= c.now {
				c.support[m.From] = max(c.support[m.From], at)
			}
			resp.Stamp = c.now + 1
		}
		c.send(resp)
		return
	}
	if c.now < c.handingEnd && m.Leader == c.cfg.ID && m.Term == c.leaderTerm {
		// This node handed its leadership over moments ago and the target's
		// announcement is on its way. A rejection would make the follower
		// campaign against the target (found in CI: node 5 took over from a
		// transfer to node 2), so for one leader timeout the old term is
		// still acknowledged. If the transfer fails, followers campaign one
		// leader timeout later than they would have.
		c.send(Message{Type: MsgHeartbeatResp, To: m.From, Term: c.leaderTerm, Leader: c.cfg.ID})
		return
	}
	// Not the leader the sender thinks: tell it what this node knows.
	c.send(Message{Type: MsgHeartbeatResp, To: m.From, Term: c.leaderTerm, Leader: c.leader, Reject: true})
}

func (c *core) stepHeartbeatResp(m Message) {
	if m.Release {
		c.release(m.From)
		return
	}
	newer := m.Leader != 0 && m.Leader != c.cfg.ID && m.Term > c.leaderTerm && m.Term.OwnedBy(m.Leader)
	// The leader itself, asked, says it still leads the term this node last
	// knew (its answer to the query of a restarted or rejoining node, or its
	// refusal of that node's proposal): the same leadership, at the same
	// term. A plain acknowledgement does not count: one still in flight
	// from a leader that has since died would undo the campaign.
	current := m.Reject && m.From == m.Leader && m.Term == c.leaderTerm && m.Term.OwnedBy(m.Leader) &&
		(c.role == RoleNoLeader || c.role == RoleElecting)
	switch {
	case newer && c.majority() > 1 && m.From != m.Leader && c.role == RoleLeader && c.now < c.leaseEnd():
		// Quorum mode: a leader whose lease holds hears, second-hand, of a
		// leadership at a higher term (a returning node that followed it
		// before this one was elected at a lower term it knew). It counts
		// a majority now, so that leadership is over: lead on above it.
		c.observeTerm(m.Term)
		c.reassert()
	case newer && c.majority() > 1 && m.From != m.Leader:
		c.hearsay(m.Leader, m.Term)
	case newer || current:
		// A newer leadership, heard second-hand, or the leader's own word;
		// heartbeats will verify it. Second-hand (a restarted or rejoining
		// node's query answered by another member), the first one goes now:
		// this node may have no connection to that leader yet, and would
		// not notice its crash for a heartbeat interval, meanwhile sending
		// lower nodes' elections back to it (bully).
		c.observeTerm(m.Term)
		c.follow(m.Leader, m.Term)
		if m.From != m.Leader {
			c.askLeader()
		}
	case m.Reject && c.majority() > 1 && m.Leader != 0 && m.Leader != m.From && m.Leader != c.cfg.ID &&
		m.Term == c.leaderTerm && m.Term.OwnedBy(m.Leader) && (c.role == RoleNoLeader || c.role == RoleElecting):
		// Quorum mode: a member still bound to the leadership this node
		// last knew refused its campaign (see refuseRival). Ask that leader
		// itself: its answer is the word this node follows it on.
		c.send(Message{Type: MsgHeartbeat, To: m.Leader, Term: m.Term, Leader: 0})
	case c.role == RoleLeader && m.Reject && m.Term > c.leaderTerm:
		// Someone saw a newer leadership whose leader it no longer knows:
		// lead on above it rather than be refused forever (see reassert).
		c.observeTerm(m.Term)
		c.reassert()
	case c.role != RoleFollower || m.From != c.leader:
		// Late or unsolicited: nothing to do.
	case m.Leader == c.leader && m.Term == c.leaderTerm:
		c.sinceAck = 0
		c.takeStamp(m)
	case m.Term < c.leaderTerm:
		// The leader has not yet heard of its own newer term (a ring
		// Coordinator still on its way, or lost), or this answers an older
		// heartbeat: not a denial. If it stays behind for half a timeout,
		// hand it the announcement directly.
		if c.sinceAck > c.cfg.LeaderTimeoutTicks/2 {
			c.send(Message{Type: MsgCoordinator, To: c.leader, Term: c.leaderTerm, Leader: c.leader, Confirmed: true})
		}
	default:
		// Our leader knows our term and says it does not lead it.
		c.suspect()
	}
}

func (c *core) stepCoordinator(m Message) {
	// A term has one owner, so an announcement at our own leader term is the
	// same leadership: take it again even after we lost sight of the leader.
	same := m.Term == c.leaderTerm && m.Leader == c.leader
	if m.From != m.Leader && m.Term > c.leaderTerm && c.keepsLeader() {
		// Quorum mode: a round's announcement passed on by another node
		// (a ring Coordinator from a node back from isolation, naming the
		// round's winner, maybe this node) while this node's leadership
		// holds: refuse it, and stop it here (see refuseRival). (A
		// proposal comes from its proposer: one passed on is no better.)
		c.refuseRival(m.From)
		if m.Initiator != m.From {
			c.refuseRival(m.Initiator)
		}
		return
	}
	if c.majority() > 1 && m.Confirmed && m.From != m.Leader && m.Leader != c.cfg.ID && m.Term >= c.leaderTerm {
		// Quorum mode: an announcement passed on by another node (a ring
		// Coordinator on its way round, a bully follower naming its
		// leader). It neither makes this node follow nor keeps it calm.
		if !same || c.role != RoleFollower {
			c.hearsay(m.Leader, m.Term)
		}
		if c.observer != nil {
			c.observer.Coordinated(c.host(), m, true) // a ring passes it on
		}
		return
	}
	accepted := m.Term >= c.leaderTerm
	if accepted && !same && m.Term == c.leaderTerm && c.role == RoleElecting && c.cfg.Preempt {
		if lr, ok := c.rankOf(m.Leader); ok && lr.Less(c.self) {
			accepted = false // we are deposing that leadership on purpose
		}
	}
	switch {
	case !accepted:
		// Stale: tell the stale leader of the newer term. It follows the
		// newer leader, or, if that one is gone, re-announces itself above it.
		if m.Leader != c.cfg.ID && !(m.Term == c.leaderTerm && c.role == RoleElecting) {
			c.send(Message{Type: MsgHeartbeatResp, To: m.Leader, Term: c.leaderTerm, Leader: c.leader, Reject: true})
		}
	case m.Leader == c.cfg.ID:
		// A ring announcement that names this node. Only a newer term makes
		// it lead: a late copy of a term it already led and gave up (resign,
		// transfer, lost lease) must not bring it back.
		// (Quorum mode: a round that names this node while its lease
		// holds was refused above, with its own announcement at its own
		// term; it once reasserted above the round's term.)
		if m.Term > c.leaderTerm && !c.excluded() && c.proposal != m.Term {
			if c.majority() > 1 {
				c.propose(m.Term) // quorum mode: lead once a majority acknowledged
			} else {
				c.becomeLeader(m.Term)
			}
		}
		if c.majority() > 1 {
			// Quorum mode: the ring's token ends here. Passed on, it would
			// reach the next node from this one, naming this one, as if it
			// were this node's own announcement: it has only proposed.
			return
		}
	case c.majority() > 1 && !m.Confirmed && c.role == RoleLeader:
		// Quorum mode: a rival's proposal reaches the sitting leader, whose
		// lease still holds (it steps down the tick the lease ends), so the
		// rival cannot gather a majority. Refuse, and name this leadership:
		// a follower that lost sight of it (an isolated node back, a paused
		// one resumed) follows it again at the same term (Raft's check-quorum).
		c.send(Message{Type: MsgHeartbeatResp, To: m.Leader, Term: c.leaderTerm, Leader: c.cfg.ID, Reject: true})
		return
	case c.majority() > 1 && !m.Confirmed && c.promised() && c.promisedTo != m.Leader:
		// Quorum mode: this node promised another node its support, which
		// may still count it towards a lease. Refuse, and say whom it follows.
		c.send(Message{Type: MsgHeartbeatResp, To: m.Leader, Term: c.leaderTerm, Leader: c.leader, Reject: true})
		return
	case c.majority() > 1 && !m.Confirmed:
		// Quorum mode: acknowledge, and wait for the confirmation.
		// Like a voter, hold off campaigning while the proposer collects acks.
		c.promise(m.Leader)
		c.observeTerm(m.Term)
		c.algo.Reset()
		c.noLeader(c.cfg.ElectionTimeoutTicks + c.jitter())
		c.tentative, c.tentativeFor = m.Leader, m.Term
		c.send(Message{Type: MsgCoordinatorAck, To: m.Leader, Term: m.Term})
	case same && c.role == RoleFollower:
		c.sinceAck = 0
		c.takeStamp(m)
	default:
		c.follow(m.Leader, m.Term)
		c.takeStamp(m)
	}
	if c.observer != nil {
		c.observer.Coordinated(c.host(), m, accepted)
	}
}

func (c *core) stepAck(m Message) {
	if c.role == RoleLeader && m.Term == c.leaderTerm {
		c.lastHeard[m.From] = c.now
		// A late ack of the proposal that made this leadership.
		c.support[m.From] = max(c.support[m.From], c.proposedAt)
		return
	}
	if c.proposal == 0 || m.Term != c.proposal {
		return
	}
	c.acks[m.From] = true
	if len(c.acks)+1 >= c.majority() {
		t := c.proposal
		c.becomeLeader(t)
		if c.now+1 >= c.leaseEnd() {
			// The majority came too late: each ack counts from when the
			// proposal went out (and only while its sender is a live
			// member), so the lease they make has run out, or does at the
			// next tick. Leading now would end before it was even reported,
			// after followers were told:
			// give up instead, unannounced, and free them of their promises.
			c.stepDown()
			c.giveUp()
			return
		}
		c.broadcast(Message{Type: MsgCoordinator, Term: t, Leader: c.cfg.ID, Confirmed: true})
	}
}

func (c *core) stepTimeoutNow(m Message) {
	if m.Term < c.leaderTerm {
		return // from a leadership already superseded
	}
	c.observeTerm(m.Term)
	c.release(m.From) // it handed over: it claims nothing any more
	if m.Elect {
		// The sender resigned: it will not answer, so leave it out.
		c.excludeEnd, c.resigned = 0, m.From
		c.Campaign()
		return
	}
	c.win(NextTerm(c.term, c.cfg.ID))
}

// Tick implements StateMachine.
func (c *core) Tick() {
	c.now++
	if c.excludeEnd != 0 && c.now >= c.excludeEnd {
		c.excludeEnd = 0
	}
	switch c.role {
	case RoleLeader:
		c.tickLeader()
	case RoleFollower:
		c.tickFollower()
	case RoleElecting:
		c.tickProposal()
	case RoleNoLeader:
		c.tickNoLeader()
	}
	c.algo.Tick(c.host())
}

func (c *core) tickLeader() {
	// Re-announce to live members that have gone quiet: a member that
	// follows someone else (a healed partition, a missed announcement) then
	// answers with the newer leadership, or starts following this node.
	if (c.now-c.leaseFrom)%uint64(c.cfg.LeaderTimeoutTicks) == 0 {
		for _, r := range c.ringView() {
			if at, ok := c.lastHeard[r.ID]; r.ID != c.cfg.ID && (!ok || c.now-at > uint64(c.cfg.LeaderTimeoutTicks)) {
				c.send(Message{Type: MsgCoordinator, To: r.ID, Term: c.leaderTerm, Leader: c.cfg.ID, Confirmed: true})
			}
		}
	}
	if c.majority() > 1 && c.now >= c.leaseEnd() {
		// The lease ran out: no majority can still be counted. Stop
		// claiming now, before any promise counted can have ended.
		c.stepDown()
		c.giveUp()
		return
	}
	if ring := c.ringView(); c.cfg.Preempt && c.majority() > 1 && ring[len(ring)-1].ID != c.cfg.ID && c.reported == c.leadership() {
		// Quorum mode with preempt: followers are bound by their promises
		// to this leader, so a higher-ranked member cannot depose it; the
		// leader hands over to it instead, from the tick after it took
		// over, so its leadership is reported before it ends (followers
		// that took its announcement name a leader that did claim).
		_ = c.Transfer(ring[len(ring)-1].ID)
	}
}

// leaseEnd (quorum mode) is the first tick at which fewer than a majority
// (this node included) can be counted towards the lease.
func (c *core) leaseEnd() uint64 {
	ends := make([]uint64, 0, len(c.support))
	for id, at := range c.support {
		if _, live := c.members[id]; live {
			ends = append(ends, at+uint64(c.cfg.LeaseTicks))
		}
	}
	k := c.majority() - 1 // members needed besides this node
	if k <= 0 {
		return ^uint64(0)
	}
	if len(ends) < k {
		return 0
	}
	slices.Sort(ends)
	return ends[len(ends)-k] // the k-th latest
}

func (c *core) tickFollower() {
	if c.cfg.Preempt && !c.excluded() && c.majority() <= 1 {
		// With preempt a higher node deposes a lower leader as soon as it
		// knows the leader's rank (membership may learn it after the leader).
		if lr, ok := c.rankOf(c.leader); ok && lr.Less(c.self) {
			c.Campaign()
			return
		}
	}
	c.hbElapsed++
	if c.hbElapsed >= c.cfg.HeartbeatTicks {
		c.hbElapsed = 0
		c.send(Message{Type: MsgHeartbeat, To: c.leader, Term: c.leaderTerm, Leader: c.leader, Stamp: c.lastStamp})
	}
	c.sinceAck++
	if c.sinceAck > c.suspectAt {
		c.suspect()
	}
}

// askLeader sends the leader this node follows a heartbeat now, out of
// turn, at most once a tick, and restarts the heartbeat interval from it.
// Used when another node's word casts doubt on the leader (see
// Host.AskLeader): over a real network a leader whose process is gone
// refuses the connection, and the node campaigns at once.
func (c *core) askLeader() {
	if c.role != RoleFollower || c.leader == 0 || c.leader == c.cfg.ID || c.askedAt == c.now+1 {
		return
	}
	c.askedAt, c.hbElapsed = c.now+1, 0
	c.send(Message{Type: MsgHeartbeat, To: c.leader, Term: c.leaderTerm, Leader: c.leader, Stamp: c.lastStamp})
}

func (c *core) tickProposal() {
	if c.proposal == 0 {
		return
	}
	c.proposalAge++
	if c.proposalAge > c.cfg.ElectionTimeoutTicks {
		c.giveUp()
	}
}

func (c *core) tickNoLeader() {
	c.idle++
	if c.idle >= c.idleWait && !c.excluded() && !c.bootstrap() {
		if c.leaderTerm == 0 && !c.coldRanked {
			// A cluster's first election: every node's wait (or its
			// bootstrap) ends at about the same moment. Campaign in rank
			// order, as after losing a leader (SuspicionDelayer): the
			// highest node goes first and is usually announced before the
			// next one's turn, so 128 nodes starting together cost O(n)
			// messages, not the O(n^2) storm that kept 128 bully processes
			// on 2 cores from ever agreeing. Unlike after a loss, the wait
			// has no cap (a tick for each member above): capped at a
			// leader timeout, the 68 lowest of 128 nodes all campaigned on
			// the same tick whenever the highest one's announcement took
			// longer than that to reach them (127 new connections on a
			// machine still starting processes).
			c.coldRanked = true
			if w := c.coldWait(); w > 0 {
				c.idle, c.idleWait = 0, w
				return
			}
		}
		c.Campaign()
	}
}

// TicksUntilDue says how many Ticks from now this machine may next act:
// send a message or change its leadership (1: the next Tick may; 0: no timer
// is armed). The Ticks before it only advance counters. The instance loop
// uses it to sleep through idle ticks (node.DueTicker); it errs early, never
// late, and the simulator checks that after every tick.
func (c *core) TicksUntilDue() int {
	due := 0
	at := func(k int) {
		k = max(k, 1)
		if due == 0 || k < due {
			due = k
		}
	}
	switch c.role {
	case RoleLeader:
		lt := uint64(c.cfg.LeaderTimeoutTicks)
		at(int(lt - (c.now-c.leaseFrom)%lt)) // the re-announcement round
		if c.majority() > 1 {
			at(int(min(c.leaseEnd()-min(c.leaseEnd(), c.now), 1<<30)))
			if ring := c.ringView(); c.cfg.Preempt && ring[len(ring)-1].ID != c.cfg.ID {
				at(1)
			}
		}
	case RoleFollower:
		if c.cfg.Preempt && !c.excluded() && c.majority() <= 1 {
			if lr, ok := c.rankOf(c.leader); ok && lr.Less(c.self) {
				at(1)
			}
		}
		at(c.cfg.HeartbeatTicks - c.hbElapsed)
		at(c.suspectAt - c.sinceAck + 1)
	case RoleElecting:
		if c.proposal != 0 {
			at(c.cfg.ElectionTimeoutTicks - c.proposalAge + 1)
		}
	case RoleNoLeader:
		if !c.bootstrapping || len(c.ringView()) >= c.cfg.BootstrapExpect {
			k := c.idleWait - c.idle
			if c.excludeEnd != 0 {
				k = max(k, int(min(c.excludeEnd-min(c.excludeEnd, c.now), 1<<30)))
			}
			at(k)
		}
	}
	if d, ok := c.algo.(TickDuer); ok {
		if k := d.TicksUntilDue(c.host()); k > 0 {
			at(k)
		}
	} else {
		at(1)
	}
	return due
}

// bootstrap reports whether this node is a first start that has not yet
// seen BootstrapExpect members nor known a leader, and so does not campaign
// on its own. It latches when asked: the first time it finds enough members
// it stops waiting for good.
func (c *core) bootstrap() bool {
	if c.bootstrapping && len(c.ringView()) >= c.cfg.BootstrapExpect {
		c.bootstrapping = false // the cluster has formed: never wait again
	}
	return c.bootstrapping
}

// suspect reacts to a leader that stopped answering: campaign now (the
// detection timeout was jittered already).
func (c *core) suspect() {
	wait := c.suspicionWait(0)
	c.noLeader(wait)
	if wait == 0 {
		c.Campaign()
	}
}

// coldWait is how long a node waits before a cluster's first election: a
// tick for each live member above it if the algorithm orders campaigns by
// rank (a SuspicionDelayer), else none.
func (c *core) coldWait() int {
	if _, ok := c.algo.(SuspicionDelayer); !ok {
		return 0
	}
	above := RanksAbove(c.host())
	if above == 0 {
		return 0
	}
	return above + coldLeadTicks*c.cfg.LeaderTimeoutTicks
}

// coldLeadTicks is how many leader timeouts the highest node has, in a
// cluster's first election, before anyone else campaigns: the rank order
// alone (a tick a rank) let the nodes just below the highest campaign
// before its announcement reached them whenever a loaded host delayed it
// (128 processes on 2 cores: 127 new connections, seconds), and each such
// campaign sent its own announcements. Nothing is replaced in a hurry in a
// first election, and when the highest node is up its announcement comes
// long before this ends.
const coldLeadTicks = 2

// suspicionWait is how long to wait before campaigning after losing the
// leader: the algorithm's SuspicionDelay if it has one, else fallback.
func (c *core) suspicionWait(fallback int) int {
	if d, ok := c.algo.(SuspicionDelayer); ok {
		return max(0, d.SuspicionDelay(c.host()))
	}
	return fallback
}

// Observe implements StateMachine.
func (c *core) Observe(ev Event) {
	switch ev.Type {
	case EventJoin:
		id := ev.Member.ID
		if id == 0 || id == c.cfg.ID {
			c.rejected++
			return
		}
		old, known := c.members[id]
		c.members[id] = ev.Member
		if !known || old != ev.Member {
			c.ring = nil
		}
		switch {
		case c.role == RoleLeader:
			// Tell the newcomer who leads; this also settles a healed partition.
			c.send(Message{Type: MsgCoordinator, To: id, Term: c.leaderTerm, Leader: c.cfg.ID, Confirmed: true})
		case c.role == RoleNoLeader && c.term != 0:
			// A node that knows of earlier terms (a restart, a healed
			// partition) asks each member it meets who leads, instead of
			// waiting to campaign: a leader whose gossip never saw this node
			// leave will not announce itself. Any reply names the leadership.
			c.send(Message{Type: MsgHeartbeat, To: id, Term: c.term, Leader: 0})
		}
	case EventLeave, EventDead:
		id := ev.Member.ID
		if _, ok := c.members[id]; !ok {
			return
		}
		delete(c.members, id)
		delete(c.lastHeard, id)
		c.ring = nil
		if c.role == RoleFollower && id == c.leader && (ev.Type == EventLeave || !c.leaderFresh()) {
			// A leader that said it leaves is gone. Gossip's death verdict
			// alone is not taken against a leader that answered this node's
			// heartbeat within half a timeout: memberlist declares a node
			// dead when its refutation of a suspicion comes late (raised
			// while it was cut off, and timing out just after the cut
			// healed, as it became leader), and followers then dropped a
			// live leader for up to a timeout (a one-hour chaos run: two
			// /leader 503s during a follower's kill). The heartbeat timeout
			// still decides: a leader that is really gone stops answering
			// (and a dead process's host refuses at once), and until its
			// refutation rejoins it, its answers are refused as a
			// non-member's.
			c.noLeader(c.suspicionWait(c.jitter()))
		}
		if c.tentative == id {
			c.tentative = 0
		}
	case EventLeaderTimeout:
		if c.role == RoleFollower {
			c.suspect()
		}
	case EventSendFailed, EventPeerBusy:
		// Only a message this node could have sent comes back: anything
		// else is a caller's bug, and the algorithms would resend it.
		if ev.Msg.From != c.cfg.ID || CheckMessage(ev.Msg, 0) != nil {
			c.rejected++
			return
		}
		if b, ok := c.algo.(BusyObserver); ok && ev.Type == EventPeerBusy {
			b.PeerBusy(c.host(), ev.Msg)
			return
		}
		// A busy refusal is a failed send to an algorithm without the
		// feature (the ring skips to the next successor).
		c.algo.SendFailed(c.host(), ev.Msg)
	}
}

// Campaign implements StateMachine.
func (c *core) Campaign() {
	if c.role == RoleLeader && !c.excluded() {
		return
	}
	c.algo.Campaign(c.host())
}

// exclude keeps this node out of elections for a few rounds, or until a
// leader is settled.
func (c *core) exclude() {
	c.excludeEnd = c.now + uint64(3*(c.cfg.ElectionTimeoutTicks+c.cfg.LeaderTimeoutTicks))
}

// Resign implements StateMachine.
func (c *core) Resign() error {
	if c.role != RoleLeader {
		return ErrNotLeader
	}
	if len(c.members) == 0 {
		return ErrNoCandidate
	}
	c.exclude()
	c.noLeader(0)
	c.stepDown()
	c.algo.Campaign(c.host())
	return nil
}

// Transfer implements StateMachine.
func (c *core) Transfer(to NodeID) error {
	if c.role != RoleLeader {
		return ErrNotLeader
	}
	if to == c.cfg.ID {
		return nil
	}
	if _, ok := c.members[to]; !ok {
		return fmt.Errorf("%w: %d is not a live member", ErrUnknownNode, to)
	}
	t := c.leaderTerm
	c.exclude()
	c.noLeader(0)
	c.handingEnd = c.now + uint64(c.cfg.LeaderTimeoutTicks)
	c.stepDown()
	c.send(Message{Type: MsgTimeoutNow, To: to, Term: t})
	return nil
}

// HasReady implements StateMachine.
func (c *core) HasReady() bool {
	return c.persist || c.leaderTerm != c.savedLeader || len(c.msgs) > 0 || c.leadership() != c.reported
}

func (c *core) leadership() Leadership {
	return Leadership{Role: c.role, Leader: c.leader, Term: c.leaderTerm}
}

// Ready implements StateMachine.
func (c *core) Ready() Ready {
	var rd Ready
	if c.persist {
		rd.Term, c.persist = c.term, false
	}
	if c.leaderTerm != c.savedLeader {
		rd.LeaderTerm, c.savedLeader = c.leaderTerm, c.leaderTerm
	}
	if l := c.leadership(); l != c.reported {
		c.reported = l
		rd.Change = &l
	}
	rd.Messages, c.msgs = c.msgs, nil
	return rd
}

// Status implements StateMachine.
func (c *core) Status() Status {
	st := Status{ID: c.cfg.ID, Algorithm: c.algo.Name(), Role: c.role, Leader: c.leader, LeaderTerm: c.leaderTerm,
		Term: c.term, Members: len(c.members) + 1, Excluded: c.excluded(),
		Bootstrapping: c.bootstrapping && len(c.ringView()) < c.cfg.BootstrapExpect, Rejected: c.rejected,
		RefusedTerms: c.refusedTerms, RefusedMembership: c.refusedMembership, Now: c.now}
	if c.role == RoleLeader && c.majority() > 1 {
		st.LeaseEnd = c.leaseEnd()
	}
	return st
}

// reassert has a sitting leader announce itself again at a new term, above
// every term seen: bully's leader does it when a lower node runs an election
// while it leads, and any leader told of a newer term whose leader is gone.
// A node that campaigned or followed at a higher term then follows it, at a
// term no lower than it saw. In quorum mode only a leader whose lease still
// holds does so: it counts a majority now, so no other node can (promises
// are given to one node at a time), and a new term continues the same
// claim. A leader whose lease is gone steps down and proposes instead.
func (c *core) reassert() {
	if c.majority() > 1 && c.now+1 >= c.leaseEnd() {
		// (A lease that ends at the next tick would end the new term's
		// claim before it was even reported, after followers were told.)
		c.stepDown()
		c.propose(NextTerm(c.term, c.cfg.ID))
		return
	}
	t := NextTerm(c.term, c.cfg.ID)
	c.becomeLeader(t)
	c.broadcast(Message{Type: MsgCoordinator, Term: t, Leader: c.cfg.ID, Confirmed: true})
}
