package node

import (
	"testing"

	"github.com/electord/electord/election"
)

// fakeDue is a state machine that only counts its ticks: due is its own
// tick count at which it is next due (0: never).
type fakeDue struct {
	election.StateMachine // nil: the set calls nothing else but Status
	now, due              int
	ticks, advances       int // calls of Tick and of Advance
}

func (d *fakeDue) Tick() { d.Advance(1); d.advances--; d.ticks++ }

// Advance is k ticks; the due one, if among them, acts (its timer ends).
func (d *fakeDue) Advance(k int) {
	d.now += k
	d.advances++
	if d.due != 0 && d.now >= d.due {
		d.due = 0
	}
}
func (d *fakeDue) HasReady() bool          { return false }
func (d *fakeDue) Status() election.Status { return election.Status{} } // never quiet
func (d *fakeDue) TicksUntilDue() int {
	if d.due == 0 {
		return 0
	}
	return max(1, d.due-d.now)
}

// The named clock's tick reaches only the machines due on it; a machine's
// missed ticks are applied (at once) when it is due or before anything
// else reaches it; the clock is armed from the earliest due tick counted,
// a machine moved later or dropped only waking it early.
func TestMachineSetTicksOnlyTheDue(t *testing.T) {
	s := &namedState{machines: map[string]*namedMachine{}, dirty: map[string]bool{}, quiet: map[string]struct{}{}}
	a, b := &fakeDue{due: 50}, &fakeDue{}
	s.machines["a"] = &namedMachine{sm: s.lazily(a)}
	s.machines["b"] = &namedMachine{sm: s.lazily(b)}
	set := machineSet{s}
	s.dirty["a"], s.dirty["b"] = true, true // new machines: counted after their pass
	s.noteDues()
	clear(s.dirty)
	if got := set.TicksUntilDue(); got != 50 {
		t.Fatalf("at the start: %d, want a's 50", got)
	}
	for range 10 {
		set.Tick()
	}
	if a.now != 0 || b.now != 0 {
		t.Fatalf("10 idle ticks reached the machines: a at %d, b at %d", a.now, b.now)
	}
	if got := set.TicksUntilDue(); got != 40 {
		t.Fatalf("after 10 ticks: %d, want 40", got)
	}
	// A call on b (a message, say) catches it up first, in one Advance.
	s.machines["b"].sm.TicksUntilDue()
	if b.now != 10 || b.advances != 1 || b.ticks != 0 {
		t.Fatalf("b caught up to %d with %d advances and %d ticks, want 10, 1, 0", b.now, b.advances, b.ticks)
	}
	b.due = b.now + 3
	s.dirty["b"] = true
	s.noteDues()
	clear(s.dirty)
	if got := set.TicksUntilDue(); got != 3 {
		t.Fatalf("after b was touched: %d, want b's 3", got)
	}
	for range 3 {
		set.Tick()
	}
	if b.now != 13 {
		t.Fatalf("b's due tick: b at %d, want 13", b.now)
	}
	if a.now != 0 {
		t.Fatalf("b's due tick reached a (at %d)", a.now)
	}
	if got := set.TicksUntilDue(); got != 37 {
		t.Fatalf("after b's tick: %d, want a's 37", got)
	}
	// a's timer moves later while it waits in the heap: its old entry
	// wakes the clock early, the tick catches it up and counts it again.
	s.machines["a"].sm.TicksUntilDue()
	a.due = 80
	for range 37 {
		set.Tick()
	}
	if a.now != 50 {
		t.Fatalf("a at its old due tick: %d, want 50", a.now)
	}
	if got := set.TicksUntilDue(); got != 30 {
		t.Fatalf("after a's early wake: %d, want 30", got)
	}
	// A call arms b's timer and touches it; the clock's catch-up later in
	// the same pass (before noteDues) must reach b on its due tick.
	s.machines["b"].sm.TicksUntilDue()
	b.due = b.now + 2
	s.touch("b")
	set.Tick()
	set.Tick()
	if b.due != 0 || uint64(b.now) != s.ticks {
		t.Fatalf("a timer armed in a pass: b at %d (due %d), the clock at %d: not reached on its tick", b.now, b.due, s.ticks)
	}
	clear(s.dirty)
	delete(s.machines, "a") // dropped: its entry is stale
	delete(s.machines, "b")
	if got := set.TicksUntilDue(); got != 0 {
		t.Fatalf("no machine due: %d, want 0", got)
	}
}
