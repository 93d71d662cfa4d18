package election

import (
	"errors"
	"fmt"
)

// Config configures one node's state machine. Times are in ticks; the
// instance loop decides how long a tick is.
type Config struct {
	// ID is this node's id; required, never zero.
	ID NodeID
	// Priority ranks this node before its id does; higher wins.
	Priority int64
	// Peers are the other members known at start. More arrive as events.
	Peers []Member
	// Term is the term persisted by a previous run (0 on first start).
	Term Term
	// LeaderTerm is the term of the last leadership a previous run knew
	// (led or followed), persisted with Term; 0 on first start. The node
	// reports it while it knows no leader, and never follows an older one.
	LeaderTerm Term
	// HeartbeatTicks: a follower heartbeats its leader this often. Default 1.
	HeartbeatTicks int
	// LeaderTimeoutTicks: a follower suspects its leader after this many
	// ticks without a reply. Must exceed HeartbeatTicks. Default 5
	// heartbeats, 10 in quorum mode.
	LeaderTimeoutTicks int
	// JitterTicks: a random 0..JitterTicks is added to each leader timeout
	// and to the wait before a first election, so nodes do not all start at
	// once. Default LeaderTimeoutTicks.
	JitterTicks int
	// FirstWaitTicks, if positive, is how long the machine waits before its
	// first campaign in place of a leader timeout plus jitter: a host that
	// knows when campaigning sooner is safe, or later is wiser, says so.
	// The wait still ends early when a leader is heard of, and a cluster's
	// first election still waits its rank order after it (coldWait).
	FirstWaitTicks int
	// AnswerTimeoutTicks (bully only): wait this long for an Answer. Default 2.
	AnswerTimeoutTicks int
	// ElectionTimeoutTicks: bully waits this long for a Coordinator after an
	// Answer; a quorum proposal waits this long for acks; the ring adds
	// HopTicks per member to it. Default 10.
	ElectionTimeoutTicks int
	// HopTicks (ring only): the allowance for one hop. Default 1.
	HopTicks int
	// Quorum is the cluster size in quorum mode; 0 turns quorum mode off.
	Quorum int
	// LeaseTicks: in quorum mode a leader that has not heard from a majority
	// for this long steps down. Must be below LeaderTimeoutTicks so the old
	// leader steps down before followers elect anew. Default
	// LeaderTimeoutTicks - HeartbeatTicks.
	LeaseTicks int
	// Preempt lets a higher-ranked node depose a healthy leader.
	Preempt bool
	// Volatile (quorum mode): nothing this node persists outlives its
	// process (a term store in memory only), so a Term of 0 does not prove
	// a first start. Such a node holds off after every start as a restarted
	// one does (see PromiseTicks): it acknowledges no proposal and proposes
	// nothing for PromiseTicks.
	Volatile bool
	// BootstrapExpect: a node that starts with no term (a first start) and
	// has never known a leader does not start an election of its own until
	// it sees this many members, itself included. It still takes part in
	// elections others start and follows any leader it hears of. 0 (the
	// default) or 1 campaigns without waiting. Like Consul's
	// bootstrap_expect, it keeps a node with a partial view of a cluster
	// that is still forming from electing a leader the full cluster would
	// not have chosen.
	BootstrapExpect int
	// Vouched, if set, says whether the host hears steadily from member id
	// by a means that covers every election between the two nodes (a
	// heartbeat per pair of nodes), so that this machine need not hear it
	// itself. Plain mode only (quorum mode ignores it: a lease counts each
	// election's own heartbeats). While the host vouches for its leader, a
	// follower keeps quiet: it heartbeats only every QuietHeartbeatTicks
	// (which checks that it still follows the leadership its leader holds
	// and brings it the leader's support) and never times the leader out
	// itself; the host tells it when the pair falls silent
	// (EventLeaderTimeout). A leader counts a vouched member heard for a
	// quiet interval and a leader timeout after its last heartbeat, and
	// re-announces itself to it only after that. The host keeps an answer
	// steady between the ticks it applies at once (Advancer): before it
	// stops vouching for a member, it brings every machine that follows
	// that member up to date.
	Vouched func(id NodeID) bool
	// QuietHeartbeatTicks: a quiet follower's heartbeat interval (see
	// Vouched). Default 150 heartbeat intervals: every change of the
	// leadership a follower follows reaches it by an announcement that is
	// repeated each round until the follower speaks at that term, so the
	// quiet heartbeat only refreshes the leader's support and bounds how
	// long a leader counts a member that left it without a word.
	QuietHeartbeatTicks int
	// Rand returns a number in [0, n). Injected so runs are reproducible;
	// nil uses a deterministic generator seeded by ID.
	Rand func(n int) int
}

// Majority is the number of nodes a quorum needs, or 0 outside quorum mode.
func (c Config) Majority() int {
	if c.Quorum == 0 {
		return 0
	}
	return c.Quorum/2 + 1
}

// PromiseTicks (quorum mode) is how long a follower, after its leader's
// answer or its own acknowledgement of a proposal, refuses to support any
// other node: the lease with a margin, LeaseTicks*5/4 + 2. A leader counts a
// follower for at most LeaseTicks of its own clock from a moment before the
// follower's promise began, so the leader stops claiming before any promise
// it counted can have ended, as long as no node's clock runs more than about
// 11% faster than another's over one lease ((1+ρ)/(1−ρ) ≤ 5/4), plus two
// ticks for rounding. See docs/ALGORITHMS.md ("Quorum mode").
func (c Config) PromiseTicks() int { return c.LeaseTicks + c.LeaseTicks/4 + 2 }

// Defaults returns a copy with every zero field filled in as a state
// machine would (the timings a node actually runs with).
func (c Config) Defaults() Config { return c.withDefaults() }

// withDefaults returns a copy with zero fields filled in.
func (c Config) withDefaults() Config {
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = 1
	}
	if c.LeaderTimeoutTicks == 0 {
		c.LeaderTimeoutTicks = 5 * c.HeartbeatTicks
		if c.Quorum > 0 {
			// A lease (LeaderTimeoutTicks - HeartbeatTicks by default) must
			// outlast the hops that start and renew it: proposal, ack,
			// confirmation, and a heartbeat echoing the confirmation's
			// stamp. Where a tick is one hop (the simulator), 5 is too few.
			c.LeaderTimeoutTicks = 10 * c.HeartbeatTicks
		}
	}
	if c.JitterTicks == 0 {
		c.JitterTicks = c.LeaderTimeoutTicks
	}
	if c.AnswerTimeoutTicks == 0 {
		c.AnswerTimeoutTicks = 2
	}
	if c.ElectionTimeoutTicks == 0 {
		c.ElectionTimeoutTicks = 10
	}
	if c.HopTicks == 0 {
		c.HopTicks = 1
	}
	if c.LeaseTicks == 0 {
		c.LeaseTicks = c.LeaderTimeoutTicks - c.HeartbeatTicks
	}
	if c.QuietHeartbeatTicks == 0 {
		c.QuietHeartbeatTicks = 150 * c.HeartbeatTicks
	}
	if c.Rand == nil {
		s := uint64(c.ID)*0x9E3779B97F4A7C15 | 1
		c.Rand = func(n int) int {
			s ^= s << 13
			s ^= s >> 7
			s ^= s << 17
			return int(s % uint64(n))
		}
	}
	return c
}

// Validate checks the fields against each other. Errors name the field.
func (c Config) Validate() error {
	d := c.withDefaults()
	var errs []error
	if d.ID == 0 {
		errs = append(errs, errors.New("ID: must not be zero"))
	}
	for _, p := range d.Peers {
		if p.ID == d.ID {
			errs = append(errs, fmt.Errorf("Peers: contains this node's own id %d", p.ID))
		}
		if p.ID == 0 {
			errs = append(errs, errors.New("Peers: contains id 0"))
		}
	}
	for name, v := range map[string]int{"HeartbeatTicks": d.HeartbeatTicks, "LeaderTimeoutTicks": d.LeaderTimeoutTicks,
		"AnswerTimeoutTicks": d.AnswerTimeoutTicks, "ElectionTimeoutTicks": d.ElectionTimeoutTicks, "HopTicks": d.HopTicks, "FirstWaitTicks": d.FirstWaitTicks,
		"JitterTicks": d.JitterTicks, "LeaseTicks": d.LeaseTicks, "QuietHeartbeatTicks": d.QuietHeartbeatTicks} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative (got %d)", name, v))
		}
	}
	if d.QuietHeartbeatTicks < d.HeartbeatTicks {
		errs = append(errs, fmt.Errorf("QuietHeartbeatTicks: must be at least HeartbeatTicks (%d < %d)", d.QuietHeartbeatTicks, d.HeartbeatTicks))
	}
	if d.LeaderTimeoutTicks <= d.HeartbeatTicks {
		errs = append(errs, fmt.Errorf("LeaderTimeoutTicks: must exceed HeartbeatTicks (%d <= %d)", d.LeaderTimeoutTicks, d.HeartbeatTicks))
	}
	for name, t := range map[string]Term{"Term": d.Term, "LeaderTerm": d.LeaderTerm} {
		if t.Epoch() > MaxConfigEpoch {
			errs = append(errs, fmt.Errorf("%s: %v: %w (epoch %d, the limit is %d)", name, t, ErrTermRange, t.Epoch(), uint64(MaxConfigEpoch)))
		}
	}
	if d.LeaderTerm > d.Term {
		errs = append(errs, fmt.Errorf("LeaderTerm: %v is above Term %v (the highest term seen covers every leadership)", d.LeaderTerm, d.Term))
	}
	if d.Quorum < 0 {
		errs = append(errs, fmt.Errorf("Quorum: must be 0 (off) or the cluster size (got %d)", d.Quorum))
	}
	if d.BootstrapExpect < 0 {
		errs = append(errs, fmt.Errorf("BootstrapExpect: must be 0 (off) or the expected cluster size (got %d)", d.BootstrapExpect))
	}
	if d.Quorum > 0 && d.LeaseTicks >= d.LeaderTimeoutTicks {
		errs = append(errs, fmt.Errorf("LeaseTicks: must be below LeaderTimeoutTicks in quorum mode (%d >= %d)", d.LeaseTicks, d.LeaderTimeoutTicks))
	}
	if d.Quorum > 0 && d.LeaseTicks <= d.HeartbeatTicks {
		errs = append(errs, fmt.Errorf("LeaseTicks: must exceed HeartbeatTicks (%d <= %d)", d.LeaseTicks, d.HeartbeatTicks))
	}
	return errors.Join(errs...)
}
