package election

import (
	"fmt"
	"slices"
)

// Algorithm is the part of a strategy that differs between ring and bully:
// how an election runs. Core calls it from its own methods only, so it
// inherits Core's contract: never called concurrently.
type Algorithm interface {
	// Name is "ring" or "bully".
	Name() string
	// Campaign starts an election attempt. If c.Excluded(), this node is
	// resigning and must run the election without itself.
	Campaign(c *Core)
	// Step handles MsgElection and MsgAnswer.
	Step(c *Core, m Message)
	// Coordinated is told of every Coordinator after Core handled it;
	// accepted says whether Core took it.
	Coordinated(c *Core, m Message, accepted bool)
	// Tick advances the algorithm's own timers; called on every tick.
	Tick(c *Core)
	// SendFailed is told of a message the transport could not deliver.
	SendFailed(c *Core, m Message)
	// Reset drops any election in progress (a leader was settled).
	Reset()
}

// Core is the state machine shared by every strategy: terms, leadership,
// heartbeats, the quorum lease, resign and transfer. The Algorithm decides
// how an election runs. Core implements StateMachine.
type Core struct {
	cfg  Config
	algo Algorithm
	self Rank

	term       Term // the highest term seen; persisted
	leaderTerm Term // the term of the leadership this node believes in
	leader     NodeID
	role       Role

	members map[NodeID]Member // live members, self excluded
	ring    []Rank            // live members and self, sorted by rank; nil when stale

	now        uint64
	sinceAck   int // follower: ticks since the leader last confirmed
	hbElapsed  int
	suspectAt  int // follower: this round's leader timeout, jitter included
	idle       int // no leader: ticks waited
	idleWait   int // no leader: ticks to wait before campaigning
	excludeEnd uint64

	lastHeard map[NodeID]uint64 // leader, quorum mode: when each follower was last heard
	leaseFrom uint64            // leader, quorum mode: when it started leading

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

	msgs     []Message
	persist  bool
	reported Leadership
	rejected uint64
}

var _ StateMachine = (*Core)(nil)

// NewCore builds a node that elects with algo.
func NewCore(cfg Config, algo Algorithm) (*Core, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Core{
		cfg:       cfg,
		algo:      algo,
		self:      Rank{Priority: cfg.Priority, ID: cfg.ID},
		term:      cfg.Term,
		members:   make(map[NodeID]Member, len(cfg.Peers)),
		lastHeard: map[NodeID]uint64{},
	}
	for _, p := range cfg.Peers {
		c.members[p.ID] = p
	}
	c.bootstrapping = cfg.Term == 0 && cfg.BootstrapExpect > 1
	// Wait a leader timeout, plus jitter, to learn of a sitting leader before
	// campaigning.
	c.idleWait = cfg.LeaderTimeoutTicks + c.jitter()
	return c, nil
}

// ---- accessors for algorithms ----

// ID is this node's id.
func (c *Core) ID() NodeID { return c.cfg.ID }

// Self is this node's rank.
func (c *Core) Self() Rank { return c.self }

// Term is the highest term this node has seen.
func (c *Core) Term() Term { return c.term }

// Role is this node's role.
func (c *Core) Role() Role { return c.role }

// Leader is the leader this node believes in, or 0.
func (c *Core) Leader() NodeID { return c.leader }

// LeaderTerm is the term of the leadership this node believes in.
func (c *Core) LeaderTerm() Term { return c.leaderTerm }

// Config is the configuration with defaults filled in.
func (c *Core) Config() Config { return c.cfg }

// Excluded reports whether this node resigned or handed over and must not
// stand in the current round.
func (c *Core) Excluded() bool { return c.excludeEnd != 0 }

// LeaderFresh reports whether this node follows a leader that answered
// within half a leader timeout.
func (c *Core) LeaderFresh() bool {
	return c.role == RoleFollower && c.sinceAck <= c.cfg.LeaderTimeoutTicks/2
}

// Proposing reports whether this node won an election in quorum mode and
// waits for a majority to acknowledge it.
func (c *Core) Proposing() bool { return c.proposal != 0 }

// Majority is the number of nodes a quorum needs, or 0 outside quorum mode.
func (c *Core) Majority() int {
	if c.cfg.Quorum == 0 {
		return 0
	}
	return c.cfg.Quorum/2 + 1
}

// Ring is the live members and this node sorted by rank, lowest first.
// The slice is shared: do not modify it.
func (c *Core) Ring() []Rank {
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

// Successor is the live member ranked next above r, wrapping to the lowest.
// It may be this node.
func (c *Core) Successor(r Rank) Rank {
	ring := c.Ring()
	i, found := slices.BinarySearchFunc(ring, r, Rank.Compare)
	if found {
		i++
	}
	if i >= len(ring) {
		i = 0
	}
	return ring[i]
}

// RankOf is a live member's rank, or false when it is not a live member.
func (c *Core) RankOf(id NodeID) (Rank, bool) {
	if id == c.cfg.ID {
		return c.self, true
	}
	m, ok := c.members[id]
	return m.Rank(), ok
}

// Rand returns a number in [0, n) from the injected source.
func (c *Core) Rand(n int) int {
	if n <= 0 {
		return 0
	}
	return c.cfg.Rand(n)
}

func (c *Core) jitter() int { return c.Rand(c.cfg.JitterTicks + 1) }

// ---- effects ----

// Send queues a message; From is filled in.
func (c *Core) Send(m Message) {
	m.From = c.cfg.ID
	c.msgs = append(c.msgs, m)
}

// ObserveTerm raises the highest term seen.
func (c *Core) ObserveTerm(t Term) {
	if t > c.term {
		c.term = t
		c.persist = true
	}
}

// NewAttempt starts an election attempt at a term above any seen, which this
// node owns, and returns it. The node is electing from now on.
func (c *Core) NewAttempt() Term {
	c.ObserveTerm(NextTerm(c.term, c.cfg.ID))
	if c.role != RoleLeader {
		c.role, c.leader = RoleElecting, 0
	}
	return c.term
}

// Win is called by an algorithm when this node won the election at term t
// (owned by this node). Outside quorum mode it leads at once and announces
// itself; in quorum mode it proposes and leads once a majority acked.
func (c *Core) Win(t Term) {
	c.ObserveTerm(t)
	if c.Majority() <= 1 {
		c.becomeLeader(t)
		c.broadcast(Message{Type: MsgCoordinator, Term: t, Leader: c.cfg.ID, Confirmed: true})
		return
	}
	c.role, c.leader = RoleElecting, 0
	c.proposal, c.proposalAge = t, 0
	c.acks = map[NodeID]bool{}
	c.broadcast(Message{Type: MsgCoordinator, Term: t, Leader: c.cfg.ID})
}

// Follow makes this node a follower of leader at term t. The ring's
// initiator uses it for a winner other than itself.
func (c *Core) Follow(leader NodeID, t Term) {
	c.ObserveTerm(t)
	c.leader, c.leaderTerm, c.role = leader, t, RoleFollower
	c.sinceAck, c.hbElapsed = 0, 0
	c.suspectAt = c.cfg.LeaderTimeoutTicks + c.jitter()
	c.settled()
}

// BecomeLeader makes this node lead at term t, which it must own.
func (c *Core) BecomeLeader(t Term) { c.becomeLeader(t) }

func (c *Core) becomeLeader(t Term) {
	if !t.OwnedBy(c.cfg.ID) {
		panic(fmt.Sprintf("election: node %d cannot lead in term %v", c.cfg.ID, t))
	}
	c.ObserveTerm(t)
	if c.role != RoleLeader {
		// A new leader has one lease period to hear from a majority.
		c.lastHeard = make(map[NodeID]uint64, len(c.members))
		c.leaseFrom = c.now
	}
	c.role, c.leader, c.leaderTerm = RoleLeader, c.cfg.ID, t
	for id := range c.acks {
		c.lastHeard[id] = c.now
	}
	c.excludeEnd = 0
	c.settled()
}

// Resigned is the node that just resigned and handed this node the
// election (0 if none); it does not stand in this round.
func (c *Core) Resigned() NodeID { return c.resigned }

// settled clears election state once a leadership is settled.
func (c *Core) settled() {
	c.bootstrapping, c.handingEnd = false, 0
	c.proposal, c.acks, c.tentative, c.resigned = 0, nil, 0, 0
	if c.leader != c.cfg.ID {
		c.excludeEnd = 0
	}
	c.algo.Reset()
}

// NoLeader makes this node leaderless after a failed round (too few
// candidates, a proposal without a majority, a lost lease): it campaigns
// again after a leader timeout plus jitter, not at once, so a minority does
// not spin through terms.
func (c *Core) NoLeader() { c.noLeader(c.cfg.LeaderTimeoutTicks + c.jitter()) }

func (c *Core) noLeader(wait int) {
	c.role, c.leader = RoleNoLeader, 0
	c.proposal, c.acks = 0, nil
	c.idle, c.idleWait = 0, wait
}

func (c *Core) broadcast(m Message) {
	for _, r := range c.Ring() {
		if r.ID != c.cfg.ID {
			m.To = r.ID
			c.Send(m)
		}
	}
}

// ---- StateMachine ----

// Step implements StateMachine.
func (c *Core) Step(m Message) error {
	if err := c.validate(m); err != nil {
		c.rejected++
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
		c.ObserveTerm(m.Term)
		c.algo.Step(c, m)
	}
	return nil
}

func (c *Core) validate(m Message) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %v from %d: %s", ErrInvalidMessage, m.Type, m.From, fmt.Sprintf(format, a...))
	}
	switch {
	case !m.Type.Valid():
		return bad("unknown type")
	case m.From == 0 || m.From == c.cfg.ID:
		return bad("bad sender")
	case m.To != c.cfg.ID:
		return bad("addressed to %d, not %d", m.To, c.cfg.ID)
	case m.Term == 0 && m.Type != MsgHeartbeatResp:
		return bad("zero term")
	}
	if r, ok := c.members[m.From]; ok && m.FromRank != (Rank{}) && m.FromRank != r.Rank() {
		return bad("claims rank %v, membership says %v", m.FromRank, r.Rank())
	}
	switch m.Type {
	case MsgCoordinator:
		if m.Leader == 0 || !m.Term.OwnedBy(m.Leader) {
			return bad("leader %d does not own term %v", m.Leader, m.Term)
		}
	case MsgElection:
		if m.Initiator == 0 || !m.Term.OwnedBy(m.Initiator) {
			return bad("initiator %d does not own term %v", m.Initiator, m.Term)
		}
		for _, r := range m.Candidates {
			if known, ok := c.RankOf(r.ID); ok && known != r {
				return bad("candidate %d claims rank %v, membership says %v", r.ID, r, known)
			}
		}
	}
	return nil
}

func (c *Core) stepHeartbeat(m Message) {
	if c.role == RoleLeader && m.Term == c.leaderTerm && m.Leader == c.cfg.ID {
		c.lastHeard[m.From] = c.now
		c.Send(Message{Type: MsgHeartbeatResp, To: m.From, Term: c.leaderTerm, Leader: c.cfg.ID})
		return
	}
	if c.now < c.handingEnd && m.Leader == c.cfg.ID && m.Term == c.leaderTerm {
		// This node handed its leadership over moments ago and the target's
		// announcement is on its way. A rejection would make the follower
		// campaign against the target (found in CI: node 5 took over from a
		// transfer to node 2), so for one leader timeout the old term is
		// still acknowledged. If the transfer fails, followers campaign one
		// leader timeout later than they would have.
		c.Send(Message{Type: MsgHeartbeatResp, To: m.From, Term: c.leaderTerm, Leader: c.cfg.ID})
		return
	}
	// Not the leader the sender thinks: tell it what this node knows.
	c.Send(Message{Type: MsgHeartbeatResp, To: m.From, Term: c.leaderTerm, Leader: c.leader, Reject: true})
}

func (c *Core) stepHeartbeatResp(m Message) {
	newer := m.Leader != 0 && m.Leader != c.cfg.ID && m.Term > c.leaderTerm && m.Term.OwnedBy(m.Leader)
	switch {
	case newer:
		// A newer leadership, heard second-hand; heartbeats will verify it.
		c.ObserveTerm(m.Term)
		c.Follow(m.Leader, m.Term)
	case c.role == RoleLeader && m.Reject && m.Term > c.leaderTerm:
		// Someone saw a newer leadership whose leader it no longer knows:
		// lead on above it rather than be refused forever.
		c.ObserveTerm(m.Term)
		c.Reassert()
	case c.role != RoleFollower || m.From != c.leader:
		// Late or unsolicited: nothing to do.
	case m.Leader == c.leader && m.Term == c.leaderTerm:
		c.sinceAck = 0
	case m.Term < c.leaderTerm:
		// The leader has not yet heard of its own newer term (a ring
		// Coordinator still on its way, or lost), or this answers an older
		// heartbeat: not a denial. If it stays behind for half a timeout,
		// hand it the announcement directly.
		if c.sinceAck > c.cfg.LeaderTimeoutTicks/2 {
			c.Send(Message{Type: MsgCoordinator, To: c.leader, Term: c.leaderTerm, Leader: c.leader, Confirmed: true})
		}
	default:
		// Our leader knows our term and says it does not lead it.
		c.suspect()
	}
}

func (c *Core) stepCoordinator(m Message) {
	// A term has one owner, so an announcement at our own leader term is the
	// same leadership: take it again even after we lost sight of the leader.
	same := m.Term == c.leaderTerm && m.Leader == c.leader
	accepted := m.Term >= c.leaderTerm
	if accepted && !same && m.Term == c.leaderTerm && c.role == RoleElecting && c.cfg.Preempt {
		if lr, ok := c.RankOf(m.Leader); ok && lr.Less(c.self) {
			accepted = false // we are deposing that leadership on purpose
		}
	}
	switch {
	case !accepted:
		// Stale: tell the stale leader of the newer term. It follows the
		// newer leader, or, if that one is gone, re-announces itself above it.
		if m.Leader != c.cfg.ID && !(m.Term == c.leaderTerm && c.role == RoleElecting) {
			c.Send(Message{Type: MsgHeartbeatResp, To: m.Leader, Term: c.leaderTerm, Leader: c.leader, Reject: true})
		}
	case m.Leader == c.cfg.ID:
		// A ring announcement that names this node. Only a newer term makes
		// it lead: a late copy of a term it already led and gave up (resign,
		// transfer, lost lease) must not bring it back.
		if m.Term > c.leaderTerm && !c.Excluded() {
			c.becomeLeader(m.Term)
		}
	case c.Majority() > 1 && !m.Confirmed:
		// Quorum mode: acknowledge, and wait for the confirmation.
		// Like a voter, hold off campaigning while the proposer collects acks.
		c.ObserveTerm(m.Term)
		c.algo.Reset()
		c.noLeader(c.cfg.ElectionTimeoutTicks + c.jitter())
		c.tentative, c.tentativeFor = m.Leader, m.Term
		c.Send(Message{Type: MsgCoordinatorAck, To: m.Leader, Term: m.Term})
	case same && c.role == RoleFollower:
		c.sinceAck = 0
	default:
		c.Follow(m.Leader, m.Term)
	}
	c.algo.Coordinated(c, m, accepted)
}

func (c *Core) stepAck(m Message) {
	if c.role == RoleLeader && m.Term == c.leaderTerm {
		c.lastHeard[m.From] = c.now
		return
	}
	if c.proposal == 0 || m.Term != c.proposal {
		return
	}
	c.acks[m.From] = true
	if len(c.acks)+1 >= c.Majority() {
		t := c.proposal
		c.becomeLeader(t)
		c.broadcast(Message{Type: MsgCoordinator, Term: t, Leader: c.cfg.ID, Confirmed: true})
	}
}

func (c *Core) stepTimeoutNow(m Message) {
	if m.Term < c.leaderTerm {
		return // from a leadership already superseded
	}
	c.ObserveTerm(m.Term)
	if m.Elect {
		// The sender resigned: it will not answer, so leave it out.
		c.excludeEnd, c.resigned = 0, m.From
		c.Campaign()
		return
	}
	c.Win(NextTerm(c.term, c.cfg.ID))
}

// Tick implements StateMachine.
func (c *Core) Tick() {
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
	c.algo.Tick(c)
}

func (c *Core) tickLeader() {
	// Re-announce to live members that have gone quiet: a member that
	// follows someone else (a healed partition, a missed announcement) then
	// answers with the newer leadership, or starts following this node.
	if (c.now-c.leaseFrom)%uint64(c.cfg.LeaderTimeoutTicks) == 0 {
		for _, r := range c.Ring() {
			if at, ok := c.lastHeard[r.ID]; r.ID != c.cfg.ID && (!ok || c.now-at > uint64(c.cfg.LeaderTimeoutTicks)) {
				c.Send(Message{Type: MsgCoordinator, To: r.ID, Term: c.leaderTerm, Leader: c.cfg.ID, Confirmed: true})
			}
		}
	}
	need := c.Majority()
	if need <= 1 || c.now-c.leaseFrom <= uint64(c.cfg.LeaseTicks) {
		return
	}
	heard := 1
	for id, at := range c.lastHeard {
		if _, live := c.members[id]; live && c.now-at <= uint64(c.cfg.LeaseTicks) {
			heard++
		}
	}
	if heard < need {
		c.NoLeader() // the lease ran out: a minority has no leader
	}
}

func (c *Core) tickFollower() {
	if c.cfg.Preempt && !c.Excluded() {
		// With preempt a higher node deposes a lower leader as soon as it
		// knows the leader's rank (membership may learn it after the leader).
		if lr, ok := c.RankOf(c.leader); ok && lr.Less(c.self) {
			c.Campaign()
			return
		}
	}
	c.hbElapsed++
	if c.hbElapsed >= c.cfg.HeartbeatTicks {
		c.hbElapsed = 0
		c.Send(Message{Type: MsgHeartbeat, To: c.leader, Term: c.leaderTerm, Leader: c.leader})
	}
	c.sinceAck++
	if c.sinceAck > c.suspectAt {
		c.suspect()
	}
}

func (c *Core) tickProposal() {
	if c.proposal == 0 {
		return
	}
	c.proposalAge++
	if c.proposalAge > c.cfg.ElectionTimeoutTicks {
		c.NoLeader()
	}
}

func (c *Core) tickNoLeader() {
	c.idle++
	if c.idle >= c.idleWait && !c.Excluded() && !c.Bootstrapping() {
		c.Campaign()
	}
}

// Bootstrapping reports whether this node is a first start that has not
// yet seen BootstrapExpect members nor known a leader, and so does not
// campaign on its own.
func (c *Core) Bootstrapping() bool {
	if c.bootstrapping && len(c.Ring()) >= c.cfg.BootstrapExpect {
		c.bootstrapping = false // the cluster has formed: never wait again
	}
	return c.bootstrapping
}

// suspect reacts to a leader that stopped answering: campaign now (the
// detection timeout was jittered already).
func (c *Core) suspect() {
	c.noLeader(0)
	c.Campaign()
}

// Observe implements StateMachine.
func (c *Core) Observe(ev Event) {
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
			c.Send(Message{Type: MsgCoordinator, To: id, Term: c.leaderTerm, Leader: c.cfg.ID, Confirmed: true})
		case c.role == RoleNoLeader && c.term != 0:
			// A node that knows of earlier terms (a restart, a healed
			// partition) asks each member it meets who leads, instead of
			// waiting to campaign: a leader whose gossip never saw this node
			// leave will not announce itself. Any reply names the leadership.
			c.Send(Message{Type: MsgHeartbeat, To: id, Term: c.term, Leader: 0})
		}
	case EventLeave, EventDead:
		id := ev.Member.ID
		if _, ok := c.members[id]; !ok {
			return
		}
		delete(c.members, id)
		delete(c.lastHeard, id)
		c.ring = nil
		if c.role == RoleFollower && id == c.leader {
			c.noLeader(c.jitter())
		}
		if c.tentative == id {
			c.tentative = 0
		}
	case EventLeaderTimeout:
		if c.role == RoleFollower {
			c.suspect()
		}
	case EventSendFailed:
		c.algo.SendFailed(c, ev.Msg)
	}
}

// Campaign implements StateMachine.
func (c *Core) Campaign() {
	if c.role == RoleLeader && !c.Excluded() {
		return
	}
	c.algo.Campaign(c)
}

// exclude keeps this node out of elections for a few rounds, or until a
// leader is settled.
func (c *Core) exclude() {
	c.excludeEnd = c.now + uint64(3*(c.cfg.ElectionTimeoutTicks+c.cfg.LeaderTimeoutTicks))
}

// Resign implements StateMachine.
func (c *Core) Resign() error {
	if c.role != RoleLeader {
		return ErrNotLeader
	}
	if len(c.members) == 0 {
		return ErrNoCandidate
	}
	c.exclude()
	c.noLeader(0)
	c.algo.Campaign(c)
	return nil
}

// Transfer implements StateMachine.
func (c *Core) Transfer(to NodeID) error {
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
	c.Send(Message{Type: MsgTimeoutNow, To: to, Term: t})
	return nil
}

// HasReady implements StateMachine.
func (c *Core) HasReady() bool {
	return c.persist || len(c.msgs) > 0 || c.leadership() != c.reported
}

func (c *Core) leadership() Leadership {
	return Leadership{Role: c.role, Leader: c.leader, Term: c.leaderTerm}
}

// Ready implements StateMachine.
func (c *Core) Ready() Ready {
	var rd Ready
	if c.persist {
		rd.Term, c.persist = c.term, false
	}
	if l := c.leadership(); l != c.reported {
		c.reported = l
		rd.Change = &l
	}
	rd.Messages, c.msgs = c.msgs, nil
	return rd
}

// Status implements StateMachine.
func (c *Core) Status() Status {
	return Status{ID: c.cfg.ID, Algorithm: c.algo.Name(), Role: c.role, Leader: c.leader, LeaderTerm: c.leaderTerm,
		Term: c.term, Members: len(c.members) + 1, Excluded: c.Excluded(), Rejected: c.rejected}
}

// Reassert has a sitting leader announce itself again at a new term, above
// every term seen. Bully uses it when a lower node runs an election while
// this node still leads; the lease keeps quorum mode safe.
func (c *Core) Reassert() {
	t := NextTerm(c.term, c.cfg.ID)
	c.becomeLeader(t)
	c.broadcast(Message{Type: MsgCoordinator, Term: t, Leader: c.cfg.ID, Confirmed: true})
}
