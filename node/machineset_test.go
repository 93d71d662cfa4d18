package node

import (
	"testing"

	"github.com/electord/electord/election"
)

// fakeDue is a state machine that is only ticked and asked when it is
// next due: due is its own tick count at which it is (0: never).
type fakeDue struct {
	election.StateMachine // nil: machineSet calls nothing else
	now, due              int
}

func (d *fakeDue) Tick()          { d.now++ }
func (d *fakeDue) HasReady() bool { return false }
func (d *fakeDue) TicksUntilDue() int {
	if d.due == 0 {
		return 0
	}
	return max(1, d.due-d.now)
}

// The named clock is armed from the earliest due tick machineSet counted
// once after ticks were applied, lowered by the machines a loop pass
// touched (noteDues); a machine moved later or dropped only wakes the
// clock early, and the tick then has every machine counted again.
func TestMachineSetCountsTheEarliestDueTick(t *testing.T) {
	a, b := &fakeDue{due: 50}, &fakeDue{}
	s := &namedState{machines: map[string]*namedMachine{"a": {sm: a}, "b": {sm: b}}, dirty: map[string]bool{}}
	set := machineSet{s}
	if got := set.TicksUntilDue(); got != 0 {
		t.Fatalf("before any count: %d, want 0 (no timer known)", got)
	}
	set.Tick()
	if got := set.TicksUntilDue(); got != 49 {
		t.Fatalf("after a tick: %d, want a's 49", got)
	}
	b.due = b.now + 3 // a call on b in a loop pass, which marks it dirty
	s.dirty["b"] = true
	s.noteDues()
	clear(s.dirty)
	if got := set.TicksUntilDue(); got != 3 {
		t.Fatalf("after b was touched: %d, want b's 3", got)
	}
	delete(s.machines, "b") // dropped: its count stands until the next tick
	if got := set.TicksUntilDue(); got != 3 {
		t.Fatalf("after b was dropped: %d, want the stale 3 (early is safe)", got)
	}
	for range 3 {
		set.Tick()
	}
	if got := set.TicksUntilDue(); got != 46 {
		t.Fatalf("after b's tick: %d, want a's 46", got)
	}
	a.due = 0
	set.Tick()
	if got := set.TicksUntilDue(); got != 0 {
		t.Fatalf("no machine due: %d, want 0", got)
	}
}
