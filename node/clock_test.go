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

// run drives a clock as the loop does for d: fire on C, a Step every
// stepEvery, arm after each.
func run(t *testing.T, c *tickClock, sm election.StateMachine, d, stepEvery time.Duration) (wakeups int) {
	t.Helper()
	c.start()
	defer c.stop()
	end := time.After(d)
	step := time.NewTicker(stepEvery)
	defer step.Stop()
	for {
		select {
		case <-end:
			return wakeups
		case <-c.C():
			wakeups++
			c.fire()
		case <-step.C:
			sm.Step(election.Message{})
		}
		c.arm()
	}
}

func TestTickClockPeriodicWithoutDueTicker(t *testing.T) {
	m := &dueMachine{every: 5}
	c := newTickClock(2 * time.Millisecond)
	sm := c.wrap(plain{m: m})
	if _, ok := sm.(*clocked); ok {
		t.Fatal("a machine without TicksUntilDue was wrapped")
	}
	w := run(t, c, sm, 200*time.Millisecond, time.Hour)
	if w < 50 || m.now != w {
		t.Errorf("periodic mode: %d wakeups, %d ticks; want one tick a wakeup, about 100", w, m.now)
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
	c.fire()
	if got := m.now - before; got < 45 {
		t.Fatalf("after a 100ms pause with a 2ms period, one wakeup applied %d ticks; want about 50", got)
	}
	if lag := time.Since(c.tickWall()); lag < 0 || lag > 10*time.Millisecond {
		t.Fatalf("tickWall is %v behind the wall clock after catching up", lag)
	}
	_ = sm
}

func TestTickClockWakesOnlyWhenDue(t *testing.T) {
	m := &dueMachine{every: 5}
	c := newTickClock(2 * time.Millisecond)
	sm := c.wrap(m)
	m.t0 = time.Now()
	w := run(t, c, sm, 300*time.Millisecond, 7*time.Millisecond)
	// About 150 ticks, a wakeup every 5: about 30 wakeups, not 150.
	if m.now < 75 || w > m.now/5+2 {
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
