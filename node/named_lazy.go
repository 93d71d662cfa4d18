package node

import (
	"container/heap"

	"github.com/electord/electord/election"
)

// Named machines are ticked lazily: the named clock's tick reaches only the
// machines due on it (dueHeap), and a machine is caught up on the ticks it
// missed (election.Advancer: the idle ones applied as counters) before
// anything else reaches it (lazyMachine). At rest most machines are idle
// on most ticks (a follower acts once a heartbeat interval, 20 ticks at the
// defaults), so a tick costs the machines due on it, not every machine.

// lazyMachine is a named machine as the loop sees it: every call first
// applies the named clock's ticks the machine has not had.
type lazyMachine struct {
	election.StateMachine
	adv election.Advancer
	s   *namedState
	at  uint64 // the named clock's ticks this machine has had
	due uint64 // the tick it is next due on, as last counted (0: none)
}

// lazily wraps sm, a new machine, which has had every tick so far.
func (s *namedState) lazily(sm election.StateMachine) *lazyMachine {
	adv, ok := sm.(election.Advancer)
	if !ok {
		adv = tickEach{sm}
	}
	return &lazyMachine{StateMachine: sm, adv: adv, s: s, at: s.ticks}
}

// tickEach advances a machine that cannot skip ticks one Tick at a time.
type tickEach struct{ sm election.StateMachine }

func (t tickEach) Advance(k int) {
	for range k {
		t.sm.Tick()
	}
}

// sync applies the ticks the machine missed.
func (l *lazyMachine) sync() {
	if lag := l.s.ticks - l.at; lag > 0 {
		l.at = l.s.ticks
		l.adv.Advance(int(min(lag, 1<<30)))
	}
}

func (l *lazyMachine) Step(m election.Message) error { l.sync(); return l.StateMachine.Step(m) }
func (l *lazyMachine) Observe(ev election.Event)     { l.sync(); l.StateMachine.Observe(ev) }
func (l *lazyMachine) Campaign()                     { l.sync(); l.StateMachine.Campaign() }
func (l *lazyMachine) Resign() error                 { l.sync(); return l.StateMachine.Resign() }
func (l *lazyMachine) Transfer(to election.NodeID) error {
	l.sync()
	return l.StateMachine.Transfer(to)
}
func (l *lazyMachine) Stand(on bool)           { l.sync(); l.StateMachine.Stand(on) }
func (l *lazyMachine) HasReady() bool          { l.sync(); return l.StateMachine.HasReady() }
func (l *lazyMachine) Ready() election.Ready   { l.sync(); return l.StateMachine.Ready() }
func (l *lazyMachine) Status() election.Status { l.sync(); return l.StateMachine.Status() }

// hears reports whether this machine leads and counts member id as
// following it now (election.Hearer); a machine that cannot say counts it.
func (l *lazyMachine) hears(id election.NodeID) bool {
	h, ok := l.StateMachine.(election.Hearer)
	if !ok {
		return true
	}
	l.sync()
	return h.Hears(id)
}

// Tick is the set's, on a tick this machine is due on (or was counted due
// on): the ticks up to it, applied.
func (l *lazyMachine) Tick() { l.sync() }

// TicksUntilDue implements DueTicker.
func (l *lazyMachine) TicksUntilDue() int {
	l.sync()
	if d, ok := l.StateMachine.(DueTicker); ok {
		return d.TicksUntilDue()
	}
	return 1
}

// dueEntry is a machine's due tick in the heap. A machine counted again
// gets a new entry; the old one is stale (its tick is not the machine's
// due any more, or the machine is gone) and skipped when it comes up.
type dueEntry struct {
	at   uint64
	name string
}

type dueHeap []dueEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueEntry)) }
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// live returns the machine an entry stands for, or nil if it is stale.
func (s *namedState) live(e dueEntry) *lazyMachine {
	if nm := s.machines[e.name]; nm != nil && nm.sm.due == e.at {
		return nm.sm
	}
	return nil
}

// scheduleDue records nm's next due tick (its machine counted now).
// drained: the loop pass's drain is over, so a Ready the machine holds now
// waits for the next pass that drains it: the next tick, not its next due.
func (s *namedState) scheduleDue(name string, nm *namedMachine, drained bool) {
	l := nm.sm
	k := l.TicksUntilDue()
	ready := drained && l.StateMachine.HasReady()
	if ready {
		k = 1
	}
	if k <= 0 {
		l.due = 0
		return
	}
	at := s.ticks + uint64(k)
	if !ready && l.StateMachine.Status().Quiet {
		at = s.pairs.onBeat(s.ticks, at) // its quiet heartbeat, with the beat
	}
	if at == l.due {
		return // already in the heap
	}
	l.due = at
	heap.Push(&s.due, dueEntry{at, name})
	if len(s.due) > 4*len(s.machines)+64 {
		s.compactDue()
	}
}

// compactDue drops the heap's stale entries (they pile up when machines
// are counted again and again before they come due).
func (s *namedState) compactDue() {
	kept := s.due[:0]
	for _, e := range s.due {
		if s.live(e) != nil {
			kept = append(kept, e)
		}
	}
	clear(s.due[len(kept):])
	s.due = kept
	heap.Init(&s.due)
}

// nextDue is the earliest live due tick (0: none), dropping stale entries
// from the top.
func (s *namedState) nextDue() uint64 {
	for len(s.due) > 0 {
		if s.live(s.due[0]) != nil {
			return s.due[0].at
		}
		heap.Pop(&s.due)
	}
	return 0
}
