package node

// The named elections' shared clock: one tickClock drives every named
// machine as a machineSet, waking when the earliest of them is due.

// machineSet ticks every named machine together: a tick that is not due
// only advances a machine's counters, so ticking all of them by the fewest
// ticks any of them is due in is what ticking each on its own would do.
type machineSet struct{ s *namedState }

func (m machineSet) Tick() {
	m.s.ticks++
	m.s.dueStale = true
	quiet := !m.s.quorum
	for name, nm := range m.s.machines {
		nm.sm.Tick()
		if nm.sm.HasReady() {
			m.s.touchQuiet(name, quiet)
		}
	}
}

// touch marks name for the loop pass's drain and publish.
func (s *namedState) touch(name string) {
	s.dirty[name] = true
	delete(s.quiet, name)
}

// touchQuiet marks name for the pass's drain for its machine's own traffic
// (a heartbeat stepped, a tick): in plain mode (quiet) that shows nothing
// new by itself, so the election is published only if something else
// touches it, or its drain finds a leadership change (drainNamed). In
// quorum mode a heartbeat moves the lease the view shows: published.
func (s *namedState) touchQuiet(name string, quiet bool) {
	if !quiet {
		s.touch(name)
		return
	}
	if !s.dirty[name] {
		s.dirty[name] = true
		s.quiet[name] = struct{}{}
	}
}

// TicksUntilDue is the earliest machine's due tick as last counted. A
// machine counted earlier that is gone or was moved later only makes the
// clock wake early, and the tick then has every machine counted again.
func (m machineSet) TicksUntilDue() int {
	if m.s.dueStale {
		m.s.dueAt, m.s.dueStale = 0, false
		for _, nm := range m.s.machines {
			m.s.noteDue(nm)
		}
	}
	switch at := m.s.dueAt; {
	case at == 0:
		return 0
	case at <= m.s.ticks:
		return 1
	default:
		return int(min(at-m.s.ticks, 1<<30))
	}
}

// noteDue counts nm's next due tick into dueAt.
func (s *namedState) noteDue(nm *namedMachine) {
	k := 1
	if d, ok := nm.sm.(DueTicker); ok {
		k = d.TicksUntilDue()
	}
	if at := s.ticks + uint64(k); k > 0 && (s.dueAt == 0 || at < s.dueAt) {
		s.dueAt = at
	}
}

// noteDues counts the due ticks of the machines a loop pass touched (every
// call that can change a machine's timers marks its election dirty).
func (s *namedState) noteDues() {
	if s.dueStale {
		return // every machine is counted at the next TicksUntilDue
	}
	for name := range s.dirty {
		if nm := s.machines[name]; nm != nil {
			s.noteDue(nm)
		}
	}
}
