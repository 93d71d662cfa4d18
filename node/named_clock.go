package node

import "container/heap"

// The named elections' shared clock: one tickClock drives every named
// machine as a machineSet, waking when the earliest of them is due.

// machineSet is the named machines as the named clock ticks them: a tick
// reaches only the machines due on it (named_lazy.go); the others have the
// ticks they missed applied before anything else reaches them, which is
// what ticking each every tick would have done.
type machineSet struct{ s *namedState }

func (m machineSet) Tick() {
	s := m.s
	s.ticks++
	quiet := !s.quorum
	for len(s.due) > 0 && s.due[0].at <= s.ticks {
		e := heap.Pop(&s.due).(dueEntry)
		l := s.live(e)
		if l == nil {
			continue
		}
		l.due = 0
		l.Tick()
		if l.HasReady() {
			s.touchQuiet(e.name, quiet) // counts it again
		} else {
			s.scheduleDue(e.name, s.machines[e.name], false)
		}
	}
}

// TicksUntilDue is the earliest machine's due tick, as last counted. A
// machine counted earlier whose due tick moved later only makes the clock
// wake early: that tick applies its missed ticks and counts it again.
func (m machineSet) TicksUntilDue() int {
	at := m.s.nextDue()
	switch {
	case at == 0:
		return 0
	case at <= m.s.ticks:
		return 1
	default:
		return int(min(at-m.s.ticks, 1<<30))
	}
}

// noteDues counts the due ticks of the machines a loop pass touched (every
// call that can change a machine's timers marks its election dirty).
func (s *namedState) noteDues() {
	for name := range s.dirty {
		if nm := s.machines[name]; nm != nil {
			s.scheduleDue(name, nm, true)
		}
	}
}

// untouchedRoom bounds the room a pass's touched sets keep for the next:
// a Go map keeps the room of its largest size after clear, and ranging
// over it costs that room, empty or not. One pass that touched thousands
// of elections (a mass failover, every campaign opening) would otherwise
// make every pass after it, at rest too, walk thousands of empty slots,
// three times (the drain, the publish, noteDues).
const untouchedRoom = 64

// untouch empties the pass's touched sets (dirty, quiet) for the next
// pass, with new maps when they grew large.
func (s *namedState) untouch() {
	if len(s.dirty) > untouchedRoom {
		s.dirty, s.quiet = map[string]bool{}, map[string]struct{}{}
		return
	}
	clear(s.dirty)
	clear(s.quiet)
}

// touch marks name for the loop pass's drain and publish, and counts its
// machine's due tick again at once: a catch-up later in the same pass (the
// clock applying ticks before the next message) must reach the machine on
// that tick, or a timer the call armed would fire only at the machine's
// next access.
func (s *namedState) touch(name string) {
	s.mark(name)
	if s.machines[name] != nil {
		// What this node stands for here may have changed: a candidacy
		// added, withdrawn or changed, the machine started (ownStanding).
		s.own.restand(name)
	}
}

// mark is touch for the machine's own traffic in quorum mode (touchQuiet),
// which changes nothing this node stands for but its leadership, counted
// where that is reported (namedChange).
func (s *namedState) mark(name string) {
	s.dirty[name] = true
	delete(s.quiet, name)
	s.recount(name)
}

// recount counts name's machine's due tick again, if it runs one.
func (s *namedState) recount(name string) {
	if nm := s.machines[name]; nm != nil {
		s.scheduleDue(name, nm, false)
	}
}

// touchQuiet marks name for the pass's drain for its machine's own traffic
// (a heartbeat stepped, a tick): in plain mode (quiet) that shows nothing
// new by itself, so the election is published only if something else
// touches it, or its drain finds a leadership change (drainNamed). In
// quorum mode a heartbeat moves the lease the view shows: published.
func (s *namedState) touchQuiet(name string, quiet bool) {
	if !quiet {
		s.mark(name)
		return
	}
	if !s.dirty[name] {
		s.dirty[name] = true
		s.quiet[name] = struct{}{}
	}
	s.recount(name)
}
