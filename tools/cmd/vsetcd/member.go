package main

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"
)

// view is what one member last learned about the leader, and when (wall
// clock, see README: the same clock for every process on this machine).
type view struct {
	leader string // "" while no leader is known
	term   uint64 // electord: the term; etcd: the leader key's create revision
	at     time.Time
}

// member is one candidate of either system: an electord node or an etcd
// candidate process, with the latest view its observer reported.
type member struct {
	name string
	sys  *system

	mu       sync.Mutex
	running  bool      // started and not yet signalled by the harness
	ready    bool      // etcd: session made; electord: first /watch event
	v        view      // latest view
	selfAt   time.Time // when this member learned it leads; zero when it does not
	proc     *child
	stopObs  func() // ends the member's observer (electord: the /watch stream)
	unexpect int    // exits the harness did not cause
}

func (m *member) setView(v view) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running {
		m.v, m.ready = v, true
	}
}

func (m *member) setReady() {
	m.mu.Lock()
	m.ready = m.running
	m.mu.Unlock()
}

// setSelf records that the member leads (at t) or does not (zero t).
func (m *member) setSelf(leads bool, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case !m.running:
	case !leads:
		m.selfAt = time.Time{}
	case m.selfAt.IsZero():
		m.selfAt = t
	}
}

// exited is called when one of the member's processes is gone: if it is
// the current one and the harness did not stop it, that is unexpected.
func (m *member) exited(c *child) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == c && m.running && !shuttingDown.Load() {
		m.unexpect++
		m.running = false
		logf("%s %s exited by itself", m.sys.name, m.name)
	}
}

// markStopped takes the member out of the agreement before it is signalled.
func (m *member) markStopped() {
	m.mu.Lock()
	m.running, m.ready, m.v, m.selfAt = false, false, view{}, time.Time{}
	stop := m.stopObs
	m.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// system is one side of the comparison: its members and how to (re)start one.
type system struct {
	name    string
	members []*member
	start   func(*member) error
	note    string // how it is configured, for the report
}

func (s *system) member(name string) *member {
	for _, m := range s.members {
		if m.name == name {
			return m
		}
	}
	return nil
}

// startMember (re)starts m's process through the system's start function.
func (s *system) startMember(m *member) error {
	m.mu.Lock()
	m.running, m.ready, m.v, m.selfAt = true, false, view{}, time.Time{}
	m.mu.Unlock()
	return s.start(m)
}

// agreement reports the view every running member holds, the latest time
// one of them learned it and when the leader learned it leads, if every
// running member is ready and reports the same leader, a running member,
// that satisfies ok.
func (s *system) agreement(ok func(view) bool) (v view, last, selfAt time.Time, agreed bool) {
	var first *view
	for _, m := range s.members {
		m.mu.Lock()
		running, ready, mv := m.running, m.ready, m.v
		m.mu.Unlock()
		if !running {
			continue
		}
		if !ready || mv.leader == "" || !ok(mv) || (first != nil && (mv.leader != first.leader || mv.term != first.term)) {
			return view{}, time.Time{}, time.Time{}, false
		}
		if first == nil {
			first = &mv
		}
		if mv.at.After(last) {
			last = mv.at
		}
	}
	if first == nil {
		return view{}, time.Time{}, time.Time{}, false
	}
	l := s.member(first.leader)
	if l == nil {
		return view{}, time.Time{}, time.Time{}, false
	}
	l.mu.Lock()
	running := l.running
	selfAt = l.selfAt
	l.mu.Unlock()
	if !running {
		return view{}, time.Time{}, time.Time{}, false
	}
	return *first, last, selfAt, true
}

func anyLeader(view) bool { return true }

// waitAgreed polls (every 500 µs) until the running members agree.
func (s *system) waitAgreed(timeout time.Duration, ok func(view) bool) (view, time.Time, error) {
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		if v, last, _, good := s.agreement(ok); good {
			return v, last, nil
		}
		time.Sleep(500 * time.Microsecond)
	}
	return view{}, time.Time{}, fmt.Errorf("%s: no agreement within %v: %s", s.name, timeout, s.views())
}

// waitStable waits until every member runs and they agree on one leader for
// settle without a change.
func (s *system) waitStable(timeout, settle time.Duration) (view, error) {
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		v, _, err := s.waitAgreed(time.Until(end), anyLeader)
		if err != nil {
			return view{}, err
		}
		if !s.allRunning() {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		time.Sleep(settle)
		if w, _, _, good := s.agreement(anyLeader); good && w.leader == v.leader && w.term == v.term && s.allRunning() {
			return v, nil
		}
	}
	return view{}, fmt.Errorf("%s: not stable within %v: %s", s.name, timeout, s.views())
}

func (s *system) allRunning() bool {
	for _, m := range s.members {
		m.mu.Lock()
		r := m.running
		m.mu.Unlock()
		if !r {
			return false
		}
	}
	return true
}

func (s *system) views() string {
	var b strings.Builder
	for _, m := range s.members {
		m.mu.Lock()
		fmt.Fprintf(&b, "%s:{running %v ready %v leader %q term %d} ", m.name, m.running, m.ready, m.v.leader, m.v.term)
		m.mu.Unlock()
	}
	return b.String()
}

func (s *system) unexpectedExits() int {
	n := 0
	for _, m := range s.members {
		m.mu.Lock()
		n += m.unexpect
		m.mu.Unlock()
	}
	return n
}

// The two kinds of event.
const (
	crash    = "crash (SIGKILL)"
	graceful = "graceful (SIGTERM)"
)

// sample is one event's measurement.
type sample struct {
	sys, kind      string
	n              int
	old, new       string
	known, selfDur time.Duration // until every survivor knows; until the new leader knows it leads
	failed         string        // why the event failed, "" if it did not
}

// event stops the current leader (SIGKILL or SIGTERM), measures the time
// until every surviving member reports one new leader and until that leader
// knows it leads, then restarts the stopped member and waits until the
// system is stable again.
func (s *system) event(kind string, n int, settle, agreeTimeout time.Duration) (sample, error) {
	smp := sample{sys: s.name, kind: kind, n: n}
	old, err := s.waitStable(60*time.Second, settle)
	if err != nil {
		return smp, err
	}
	smp.old = old.leader
	m := s.member(old.leader)
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	m.markStopped()
	t0 := time.Now()
	done := make(chan struct{})
	if kind == crash {
		p.signal(syscall.SIGKILL)
		<-p.exited
		close(done)
	} else {
		go func() { p.stop(syscall.SIGTERM, 10*time.Second); close(done) }()
	}
	nv, last, err := s.waitAgreed(agreeTimeout, func(v view) bool { return v.leader != old.leader && v.term != old.term })
	if err != nil {
		smp.failed = err.Error()
	} else {
		smp.new, smp.known = nv.leader, last.Sub(t0)
		// The leader may learn that it leads a little after (etcd: Campaign
		// returns) or before the others learn of it.
		l := s.member(nv.leader)
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Microsecond) {
			l.mu.Lock()
			selfAt := l.selfAt
			l.mu.Unlock()
			if !selfAt.IsZero() {
				smp.selfDur = selfAt.Sub(t0)
				break
			}
		}
		if smp.selfDur == 0 {
			smp.failed = "the new leader never reported that it leads"
		}
	}
	<-done
	if err := s.startMember(m); err != nil {
		return smp, err
	}
	return smp, nil
}
