package node

import (
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// dueMachine is a state machine with one timer: it acts every `every` ticks.
// It counts the ticks it was given and records its clock at every Step.
type dueMachine struct {
	election.StateMachine // nil: only the methods below are called
	every, now, acted     int
	stepAt                []int
	stepWall              []time.Time
	t0                    time.Time
}

func (m *dueMachine) Tick() {
	m.now++
	if m.now%m.every == 0 {
		m.acted++
	}
}
func (m *dueMachine) Step(election.Message) error {
	m.stepAt, m.stepWall = append(m.stepAt, m.now), append(m.stepWall, time.Now())
	return nil
}
func (m *dueMachine) TicksUntilDue() int { return m.every - m.now%m.every }

// plain hides TicksUntilDue.
type plain struct {
	election.StateMachine
	m *dueMachine
}

func (p plain) Tick()                         { p.m.Tick() }
func (p plain) Step(m election.Message) error { return p.m.Step(m) }

// run drives a clock as the loop does, until done says so: fire on C, a
// Step every stepEvery, arm after each. It fails the test if done is not
// reached within runDeadline. Tests end on a count of ticks or wakeups, not
// after a fixed time: on a loaded host a 2 ms ticker drops ticks, and a test
// that counted what fit in 200 ms failed there.
func run(t *testing.T, c *tickClock, sm election.StateMachine, stepEvery time.Duration, done func(wakeups int) bool) (wakeups int) {
	t.Helper()
	c.start()
	defer c.stop()
	deadline := time.After(runDeadline)
	step := time.NewTicker(stepEvery)
	defer step.Stop()
	for !done(wakeups) {
		select {
		case <-deadline:
			t.Fatalf("not done after %v: %d wakeups", runDeadline, wakeups)
		case <-c.C():
			wakeups++
			c.fire()
		case <-step.C:
			sm.Step(election.Message{})
		}
		c.arm()
	}
	return wakeups
}

// runDeadline bounds run: far above the few hundred milliseconds the runs
// take on an idle host.
const runDeadline = 20 * time.Second

func TestTickClockPeriodicWithoutDueTicker(t *testing.T) {
	m := &dueMachine{every: 5}
	c := newTickClock(2 * time.Millisecond)
	sm := c.wrap(plain{m: m})
	if _, ok := sm.(*clocked); ok {
		t.Fatal("a machine without TicksUntilDue was wrapped")
	}
	w := run(t, c, sm, time.Hour, func(w int) bool { return w >= 50 })
	if m.now != w {
		t.Errorf("periodic mode: %d wakeups, %d ticks; want one tick a wakeup", w, m.now)
	}
}

// TestTickClockCatchesUpAfterAPause: a loop that could not run for a while
// (SIGSTOP, a starved process) applies every tick it missed on its next
// wakeup while catchAll says so (a quorum-mode leader), so a lease that ran
// out meanwhile is seen to have; otherwise it drops them.
func TestTickClockCatchesUpAfterAPause(t *testing.T) {
	m := &dueMachine{every: 5}
	c := newTickClock(2 * time.Millisecond)
	c.catchAll = func() bool { return true }
	sm := c.wrap(plain{m: m})
	c.start()
	defer c.stop()
	<-c.C()
	c.fire()
	before := m.now
	time.Sleep(100 * time.Millisecond) // the loop is paused: no wakeups
	<-c.C()
	firing := time.Now()
	c.fire()
	if got := m.now - before; got < 45 {
		t.Fatalf("after a 100ms pause with a 2ms period, one wakeup applied %d ticks; want about 50", got)
	}
	// Caught up: the last applied tick is within a period of the moment
	// fire began, and not in the future. Measured against that moment, not
	// against the clock read after fire, which a loaded host can delay.
	if wall := c.tickWall(); wall.Before(firing.Add(-2*time.Millisecond)) || wall.After(time.Now()) {
		t.Fatalf("tickWall is %v behind the moment fire began after catching up", firing.Sub(wall))
	}
	_ = sm
}

func TestTickClockWakesOnlyWhenDue(t *testing.T) {
	m := &dueMachine{every: 5}
	c := newTickClock(2 * time.Millisecond)
	sm := c.wrap(m)
	m.t0 = time.Now()
	w := run(t, c, sm, 7*time.Millisecond, func(int) bool { return m.now >= 150 })
	// 150 ticks, a wakeup every 5: about 30 wakeups, not 150.
	if w > m.now/5+2 {
		t.Errorf("due mode: %d wakeups for %d ticks; want one a 5 ticks", w, m.now)
	}
	if m.acted != m.now/5 {
		t.Errorf("acted %d times in %d ticks, want %d", m.acted, m.now, m.now/5)
	}
	// Every Step saw the clock caught up with the wall clock, never ahead of
	// it, and not held at the last due tick.
	between := 0
	for i, at := range m.stepAt {
		if wall := int(m.stepWall[i].Sub(m.t0) / (2 * time.Millisecond)); at > wall+1 {
			t.Errorf("step %d: clock %d ticks, ahead of the wall clock's %d", i, at, wall)
		}
		if at%5 != 0 {
			between++
		}
	}
	if len(m.stepAt) > 10 && between == 0 {
		t.Errorf("no Step saw a clock between due ticks: %v", m.stepAt)
	}
}
