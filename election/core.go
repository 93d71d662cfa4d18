package election

import "slices"

// core is the state machine shared by every strategy: terms, leadership,
// heartbeats, resign and transfer, and in quorum mode the lease (q). The
// Algorithm decides how an election runs, acting through the Host view of
// the core (host).
type core struct {
	cfg      Config
	algo     Algorithm
	observer CoordinatorObserver // algo, when it implements it
	checker  MessageChecker      // algo, when it implements it

	term       Term // the highest term seen; persisted
	leaderTerm Term // the term of the leadership this node believes in
	leader     NodeID
	role       Role
	// The flags sit together, next to role: a node runs a machine per
	// named election, and one byte each here keeps the struct in a smaller
	// allocation class than a padded word each.
	//
	// withdrawn: this node does not stand (Stand); it is excluded from
	// every election until it stands again.
	withdrawn bool
	// bootstrapping: a first start still waiting for BootstrapExpect
	// members before campaigning on its own.
	bootstrapping bool
	coldRanked    bool // the first election's rank-ordered wait was taken (tickNoLeader)
	quiet         bool // follower: kept quiet at its last tick (quiet.go)
	acked         bool // follower: its leader answered a heartbeat of this leadership
	// leaderVouched: follower whose leader the host vouched for at its
	// last tick (quiet.go): the pair's heartbeats, not its own answers,
	// say the leader lives, and it does not time the leader out.
	leaderVouched bool
	persist       bool // term changed since the last Ready

	members peers  // live members, self excluded, with what is kept of each
	ring    []Rank // live members and self, sorted by rank; nil when stale

	now        uint64
	sinceAck   int // follower: ticks since the leader last confirmed
	hbElapsed  int
	suspectAt  int // follower: this round's leader timeout, jitter included
	idle       int // no leader: ticks waited
	idleWait   int // no leader: ticks to wait before campaigning
	excludeEnd uint64

	leaseFrom uint64 // leader: when it started leading
	askedAt   uint64 // follower: the tick (plus one) of the last out-of-turn heartbeat (askLeader)
	// answeredAt: follower, the tick (plus one) it last answered an
	// announcement that left a member out (answerUncounted); 0: not in
	// this leadership.
	answeredAt uint64
	resigned   NodeID // a leader that resigned and handed this node the election

	// Plain mode's support (plain_mode.go).
	leaderSupport int      // follower: the support its leader last told it of
	carried       int      // support handed over with a leadership (TimeoutNow, a resign's round)
	carriedEnd    uint64   // ... claimable until this tick
	held          *Message // bound follower: a rival's announcement held while it asks its leader
	heldAt        uint64
	supportN      int    // leader: its support as last counted (support)
	supportAt     uint64 // ... at this tick plus one; 0: count again
	told          int    // leader: the support last announced (quiet.go)
	// tellAll: the host stood still (stalled); the next round announces
	// to every member, vouched for or not.
	tellAll bool

	// q is quorum mode's state: proposals, promises and the lease. It is
	// nil in plain mode, where a leader leads on its own word.
	q *quorum

	// handingEnd: this former leader transferred its leadership and keeps
	// acknowledging its old term until this tick (0: no transfer pending;
	// cleared when a new leadership settles).
	handingEnd uint64

	msgs         []Message
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
		term: cfg.Term,
		// The last leadership known before a restart: reported while no
		// leader is known, and no older leadership is followed.
		leaderTerm:  cfg.LeaderTerm,
		savedLeader: cfg.LeaderTerm,
		members:     make(peers, 0, len(cfg.Peers)),
		q:           newQuorum(cfg),
	}
	for _, p := range cfg.Peers {
		c.members.put(p)
	}
	c.cfg.Peers = nil           // the members are c.members from here on
	c.reported = c.leadership() // a restart's known leadership is no change
	c.observer, _ = algo.(CoordinatorObserver)
	c.checker, _ = algo.(MessageChecker)
	c.bootstrapping = cfg.Term == 0 && cfg.BootstrapExpect > 1
	// Wait a leader timeout, plus jitter, to learn of a sitting leader before
	// campaigning.
	c.idleWait = cfg.LeaderTimeoutTicks + c.jitter()
	if cfg.FirstWaitTicks > 0 {
		c.idleWait = cfg.FirstWaitTicks
	}
	return c, nil
}

// excluded reports whether this node resigned or handed over and must not
// stand in the current round.
func (c *core) excluded() bool { return c.excludeEnd != 0 || c.withdrawn }

// ringView is the live members and this node sorted by rank, lowest first.
func (c *core) ringView() []Rank {
	if c.ring == nil {
		c.ring = make([]Rank, 0, len(c.members)+1)
		c.ring = append(c.ring, c.self())
		for _, m := range c.members {
			c.ring = append(c.ring, m.Rank())
		}
		slices.SortFunc(c.ring, Rank.Compare)
	}
	return c.ring
}

// self is this node's rank (kept in cfg, not twice).
func (c *core) self() Rank { return Rank{Priority: c.cfg.Priority, ID: c.cfg.ID} }

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
		return c.self(), true
	}
	m := c.members.get(id)
	if m == nil {
		return Rank{}, false
	}
	return m.Rank(), true
}

func (c *core) jitter() int { return c.cfg.Rand(c.cfg.JitterTicks + 1) }

// leaderFresh: this node follows a leader that answered within half a
// leader timeout, or whose liveness the host vouches for (leaderVouched).
func (c *core) leaderFresh() bool {
	if c.role == RoleFollower && c.leaderVouched {
		return c.quietLeaderFresh()
	}
	return c.role == RoleFollower && c.sinceAck <= c.cfg.LeaderTimeoutTicks/2
}

func (c *core) standing() Standing {
	return Standing{
		Role: c.role, Leader: c.leader, LeaderTerm: c.leaderTerm, Term: c.term,
		LeaderFresh: c.leaderFresh(),
		Proposing:   c.q != nil && c.q.proposing(),
		Excluded:    c.excluded(),
		Withdrawn:   c.withdrawn,
		Resigned:    c.resigned,
	}
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
		Term: c.term, Members: len(c.members) + 1, Excluded: c.excluded(), Withdrawn: c.withdrawn,
		Bootstrapping: c.bootstrapping && len(c.ringView()) < c.cfg.BootstrapExpect, Rejected: c.rejected,
		RefusedTerms: c.refusedTerms, RefusedMembership: c.refusedMembership, Now: c.now,
		Quiet: c.role == RoleFollower && c.quiet && !c.quietChanges()}
	if c.role == RoleLeader && c.q != nil {
		st.LeaseEnd = c.leaseEnd()
	}
	if r, ok := c.algo.(ElectionRefuser); ok {
		st.RefusesElections = st.Bootstrapping && r.RefusesElectionsWhileBootstrapping()
	}
	st.RefusesElections = st.RefusesElections || c.withdrawn
	return st
}
