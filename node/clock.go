package node

import (
	"time"

	"github.com/electord/electord/election"
)

// DueTicker is an optional election.StateMachine feature that lets the loop
// sleep through ticks that would do nothing, instead of waking every tick
// (10 ms: 100 wakeups a second, most of an idle node's CPU).
//
// TicksUntilDue says how many Tick calls from now the machine can take
// before one may change its state beyond its clock or produce a Ready:
// with k ≥ 1, the next k-1 Ticks only advance the clock and the k-th may
// act. 0 means no timer is armed. A smaller k than the truth is always safe
// (the loop wakes early); a larger one delays a timer. The answer may change
// after any call other than HasReady and Ready; the loop asks again after
// each.
type DueTicker interface {
	TicksUntilDue() int
}

// maxIdleTicks bounds a sleep when the machine has no timer armed.
const maxIdleTicks = 100

// maxCatchUp bounds the ticks a catchAll clock applies at once after the
// loop fell behind (100 s at the default period); beyond it the rest are
// dropped.
const maxCatchUp = 10000

// tickClock drives the state machine's Tick. A machine that is not a
// DueTicker is ticked every period by a time.Ticker, as always. A DueTicker
// is ticked only when a tick is due: the loop sleeps until then, and before
// any other call on the machine the ticks that have elapsed are applied
// (never the due one), so the machine's counters are what per-period ticking
// would have made them. A loop that falls behind by more than a period (a
// pause, SIGSTOP, a starved process) drops the ticks it missed, as a
// time.Ticker does, so a starved follower does not suspect its leader
// before it reads the answers waiting for it; but while catchAll says so (a
// quorum-mode leader) it applies every tick it missed, up to maxCatchUp: its
// clock keeps up with the wall clock, so a lease that ran out while it was
// paused ends before it does anything else, and the lease's end by the wall
// clock (tickWall) is right. (A follower's dropped ticks only lengthen its
// promises, which is safe.)
type tickClock struct {
	period time.Duration
	ticker *time.Ticker // periodic mode
	timer  *time.Timer  // due mode
	inner  interface{ Tick() }
	due    DueTicker // nil: periodic mode
	last   time.Time // when the last applied tick fell due
	ahead  int       // due mode: the timer fires this many ticks after last
	// ticking: the ticker runs (periodic mode).
	ticking bool
	// catchAll, when set and true, makes fire apply every missed tick.
	catchAll func() bool
}

func newTickClock(period time.Duration) *tickClock {
	return &tickClock{period: period}
}

// wrap returns what the loop should call: sm itself, or, for a DueTicker,
// sm behind a layer that first applies the ticks elapsed since the last.
func (c *tickClock) wrap(sm election.StateMachine) election.StateMachine {
	c.inner = sm
	c.due, _ = sm.(DueTicker)
	c.last, c.ahead = time.Now(), 0 // a new machine: arm anew
	if c.due == nil {
		return sm
	}
	return &clocked{StateMachine: sm, c: c}
}

// drive makes the clock tick t, which is not a state machine of its own
// (the set of a node's named elections): the loop calls catchUp before it
// calls into what t ticks.
func (c *tickClock) drive(t interface{ Tick() }) {
	c.inner = t
	c.due, _ = t.(DueTicker)
	c.last, c.ahead = time.Now(), 0
}

// start starts the clock (after wrap or drive).
func (c *tickClock) start() {
	c.ticker, c.ticking = time.NewTicker(c.period), true
	c.timer = time.NewTimer(time.Hour)
	c.timer.Stop()
	c.last, c.ahead = time.Now(), 0
	c.arm()
}

func (c *tickClock) stop() {
	c.ticker.Stop()
	c.timer.Stop()
}

// C fires when the loop must call fire. Only one of the two channels is
// ever live; the other is stopped.
func (c *tickClock) C() <-chan time.Time {
	if c.due == nil {
		return c.ticker.C
	}
	return c.timer.C
}

// fire applies the tick (or, in due mode, the ticks) that fell due, and
// every tick missed while the loop was behind.
func (c *tickClock) fire() {
	k := c.ahead
	if c.due == nil {
		k = 1
	}
	// catchAll is asked only when ticks were missed: it may scan every
	// named machine.
	if missed := int(time.Since(c.last) / c.period); missed > k && c.catchAll != nil && c.catchAll() {
		k = max(k, min(missed, maxCatchUp))
	}
	for range k {
		c.inner.Tick()
	}
	c.last = c.last.Add(time.Duration(k) * c.period)
	c.ahead = 0
	if now := time.Now(); now.Sub(c.last) > c.period {
		c.last = now // fell behind: drop the missed ticks
	}
}

// tickWall is when the last applied tick fell due by the wall clock: the
// machine's clock (Status().Now) stood there. It is never later than the
// moment that tick was applied.
func (c *tickClock) tickWall() time.Time { return c.last }

// catchUp applies the ticks that have elapsed since the last applied one,
// short of the due one (which fire applies): they only advance the clock.
func (c *tickClock) catchUp() {
	if c.due == nil || c.ahead <= 1 {
		return
	}
	k := min(int(time.Since(c.last)/c.period), c.ahead-1)
	for range k {
		c.inner.Tick()
	}
	c.last = c.last.Add(time.Duration(k) * c.period)
	c.ahead -= k
}

// arm sets the timer for the next due tick; the loop calls it after every
// event. In periodic mode it does nothing.
func (c *tickClock) arm() {
	if c.due == nil {
		if c.ticking {
			return
		}
		c.timer.Stop() // a revived machine that is not a DueTicker
		c.ticker.Reset(c.period)
		c.ticking = true
		return
	}
	if c.ticking {
		c.ticker.Stop()
		c.ticking = false
	}
	k := c.due.TicksUntilDue()
	if k <= 0 || k > maxIdleTicks {
		k = maxIdleTicks
	}
	if k == c.ahead {
		return // the timer is set for that tick already
	}
	c.ahead = k
	c.timer.Reset(time.Until(c.last.Add(time.Duration(k) * c.period)))
}

// rearm makes the next arm set the timer, in due mode: the timer fired
// while the loop applied nothing (a halted node skips fire), so the one set
// for that tick is spent. Its ticks are applied at the next fire, as a
// loop that fell behind applies them.
func (c *tickClock) rearm() { c.ahead = 0 }

// clocked is a DueTicker state machine whose callers see its clock caught
// up: every call but Tick, HasReady and Ready first applies the elapsed
// ticks.
type clocked struct {
	election.StateMachine
	c *tickClock
}

func (s *clocked) Step(m election.Message) error {
	s.c.catchUp()
	return s.StateMachine.Step(m)
}

func (s *clocked) Observe(ev election.Event) {
	s.c.catchUp()
	s.StateMachine.Observe(ev)
}

func (s *clocked) Campaign() {
	s.c.catchUp()
	s.StateMachine.Campaign()
}

func (s *clocked) Resign() error {
	s.c.catchUp()
	return s.StateMachine.Resign()
}

func (s *clocked) Transfer(to election.NodeID) error {
	s.c.catchUp()
	return s.StateMachine.Transfer(to)
}

func (s *clocked) Stand(on bool) {
	s.c.catchUp()
	s.StateMachine.Stand(on)
}

func (s *clocked) Status() election.Status {
	s.c.catchUp()
	return s.StateMachine.Status()
}
