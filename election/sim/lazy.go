package sim

import "github.com/electord/electord/election"

// lazy runs a machine as a host that ticks it only when it is due does
// (Options.Lazy): the ticks it receives are held back, and applied at once
// with Advance when the machine is due or before anything else reaches it.
// Status, HasReady and Ready do not apply them: the ticks held back are
// idle ones, which by the TicksUntilDue contract change no leadership and
// produce nothing (Status's clock, Now, is shown as if they had been
// applied).
type lazy struct {
	election.StateMachine
	adv election.Advancer
	lag int // ticks received and not applied
	due int // TicksUntilDue when lag was last 0; 0: no timer armed
}

func newLazy(sm election.StateMachine) election.StateMachine {
	adv, ok := sm.(election.Advancer)
	if !ok {
		return sm
	}
	l := &lazy{StateMachine: sm, adv: adv}
	l.rearm()
	return l
}

func (l *lazy) sync() {
	if l.lag > 0 {
		l.adv.Advance(l.lag)
		l.lag = 0
	}
}

func (l *lazy) rearm() {
	l.due = 0
	if d, ok := l.StateMachine.(interface{ TicksUntilDue() int }); ok {
		l.due = d.TicksUntilDue()
	} else {
		l.due = 1
	}
}

// Tick holds the tick back unless the machine is due on it.
func (l *lazy) Tick() {
	l.lag++
	if l.due != 0 && l.lag >= l.due {
		l.sync()
		l.rearm()
	}
}

func (l *lazy) TicksUntilDue() int {
	l.sync()
	l.rearm()
	return l.due
}

func (l *lazy) Step(m election.Message) error {
	l.sync()
	defer l.rearm()
	return l.StateMachine.Step(m)
}

func (l *lazy) Observe(ev election.Event) {
	l.sync()
	l.StateMachine.Observe(ev)
	l.rearm()
}

func (l *lazy) Campaign() {
	l.sync()
	l.StateMachine.Campaign()
	l.rearm()
}

func (l *lazy) Resign() error {
	l.sync()
	defer l.rearm()
	return l.StateMachine.Resign()
}

func (l *lazy) Transfer(to election.NodeID) error {
	l.sync()
	defer l.rearm()
	return l.StateMachine.Transfer(to)
}

func (l *lazy) Stand(on bool) {
	l.sync()
	l.StateMachine.Stand(on)
	l.rearm()
}

func (l *lazy) Status() election.Status {
	st := l.StateMachine.Status()
	st.Now += uint64(l.lag)
	return st
}
