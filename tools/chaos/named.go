package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/electord/electord/tools/faultnet"
	"github.com/electord/electord/tools/history"
	"github.com/electord/electord/tools/internal/candidate"
)

// App fault kinds: they run only with named elections (Options.Named).
const (
	AppKill       = "app-kill"        // SIGKILL of a random app, restarted after the hold
	AppKillLeader = "app-kill-leader" // SIGKILL of the app that leads a random election
	AppPause      = "app-pause"       // SIGSTOP of a random app, SIGCONT after the hold
)

// AppKinds is every app fault kind.
var AppKinds = []string{AppKill, AppKillLeader, AppPause}

// ElectionName is the name of the i-th named election of a run.
func ElectionName(i int) string { return fmt.Sprintf("chaos-%d", i) }

// election is one named election of a run: its recorder and its apps, one
// per node (index node-1).
type election struct {
	name string
	rec  *history.Recorder
	apps []*appSlot
}

// appSlot is the app of one node in one election. A supervisor goroutine
// keeps it standing: it starts the app in the node's namespace whenever
// none runs, the node runs and the schedule does not hold it down, and
// records every change of its standing.
type appSlot struct {
	node int
	el   *election

	mu       sync.Mutex
	proc     *candidate.Proc
	held     bool // killed by the schedule: not restarted until released
	standing bool // the last record says an app stands or is starting
}

// startApps starts the supervisors of every app; stop kills every app and
// waits for the supervisors.
func (r *runner) startApps() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, el := range r.named {
		for _, s := range el.apps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.supervise(ctx, s)
			}()
		}
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// supervise keeps s's app standing until ctx ends, then kills it.
func (r *runner) supervise(ctx context.Context, s *appSlot) {
	nd := r.c.Node(s.node)
	spec := candidate.Spec{
		// ip execs the command in place, and so does a Command that starts
		// with env: the process signalled is the app.
		Command:   append([]string{"ip", "netns", "exec", nd.NS}, r.o.AppCommand...),
		API:       nd.APIAddr,
		Elections: []string{s.el.name},
		Value:     fmt.Sprintf("app-%d", s.node),
		Log:       filepath.Join(r.c.Dir(), fmt.Sprintf("app-%s-%d.log", s.el.name, s.node)),
	}
	retry := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
			return true
		}
	}
	for ctx.Err() == nil {
		s.mu.Lock()
		held := s.held
		s.mu.Unlock()
		if held || r.c.State(s.node) != faultnet.Running {
			if !retry() {
				return
			}
			continue
		}
		// From its start the app may stand: its node registers the
		// candidacy, and may lead for it, before the app's Ready reaches
		// this process (history.App.Starting).
		s.mu.Lock()
		s.standing = true
		s.el.rec.App(history.App{At: time.Now(), Node: s.node, Starting: true})
		s.mu.Unlock()
		p, err := candidate.Start(ctx, spec)
		if err != nil {
			// The node is starting, or was killed or paused meanwhile. The
			// app has exited: a candidacy it registered ends with it.
			s.down(time.Now())
			if !retry() {
				return
			}
			continue
		}
		// Recorded under s.mu, as down records, so that a kill's record
		// never lands before this one.
		s.mu.Lock()
		s.proc = p
		s.el.rec.App(history.App{At: time.Now(), Node: s.node, Standing: true})
		s.mu.Unlock()
		select {
		case <-p.Exited():
		case <-ctx.Done():
			p.Signal(syscall.SIGCONT)
			p.Kill()
		}
		s.down(time.Now())
	}
}

// down records that s's app no longer stands, from at on, unless that
// was recorded already.
func (s *appSlot) down(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.standing {
		s.el.rec.App(history.App{At: at, Node: s.node, Standing: false})
	}
	s.standing, s.proc = false, nil
}

// kill SIGKILLs s's app, recording its end at the signal, and holds it
// down until release. It reports false if no app stood.
func (s *appSlot) kill() bool {
	s.mu.Lock()
	p := s.proc
	s.held = p != nil
	s.mu.Unlock()
	if p == nil {
		return false
	}
	s.down(time.Now())
	p.Signal(syscall.SIGCONT)
	p.Kill()
	return true
}

func (s *appSlot) release() {
	s.mu.Lock()
	s.held = false
	s.mu.Unlock()
}

func (s *appSlot) running() *candidate.Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// allStanding waits until every app of every running node stands, or
// timeout.
func (r *runner) allStanding(ctx context.Context, timeout time.Duration) bool {
	end := time.Now().Add(timeout)
	for {
		ok := true
		for _, el := range r.named {
			for _, s := range el.apps {
				if r.c.State(s.node) == faultnet.Running && s.running() == nil {
					ok = false
				}
			}
		}
		if ok {
			return true
		}
		if time.Now().After(end) || ctx.Err() != nil {
			return false
		}
		r.sleep(ctx, 20*time.Millisecond)
	}
}

// agreedNamed waits, election by election, for every up node to agree on
// its leader with answers sent after since; it notes the ones that did not.
func (r *runner) agreedNamed(what string, since time.Time) {
	for _, el := range r.named {
		if _, ok := r.agreedIn(el.rec, since, r.o.AgreeTimeout); !ok {
			r.note("%s: %s: no agreement within %v", what, el.name, r.o.AgreeTimeout)
		}
	}
}

// appFault runs one app fault: pick the app, kill or pause it, hold, bring
// it back, and record the heal once it stands again.
func (r *runner) appFault(ctx context.Context, kind string, endCalm func(time.Time)) error {
	el := r.named[r.rng.IntN(len(r.named))]
	n := 1 + r.rng.IntN(len(r.all))
	if kind == AppKillLeader {
		if a, ok := r.agreedIn(el.rec, time.Now(), r.o.AgreeTimeout); ok {
			n = int(a.Leader)
		} else {
			r.note("%s: %s has no agreed leader: a random app", kind, el.name)
		}
	}
	s := el.apps[n-1]
	hold := r.hold()
	r.note("%s: %s's app on node %d for %v", kind, el.name, n, hold)
	switch kind {
	case AppKill, AppKillLeader:
		if !s.kill() {
			r.note("%s: no app stood there", kind)
		}
		r.sleep(ctx, hold)
		s.release()
	case AppPause:
		p := s.running()
		if p == nil {
			r.note("%s: no app stood there", kind)
			break
		}
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		r.sleep(ctx, hold)
		p.Signal(syscall.SIGCONT)
	}
	if !r.allStanding(ctx, r.o.AgreeTimeout) {
		r.note("%s: not every app stood again within %v", kind, r.o.AgreeTimeout)
	}
	at := time.Now()
	endCalm(at)
	r.heal(kind, kind, at)
	r.agreed(at, r.o.AgreeTimeout)
	r.agreedNamed(kind, at)
	r.sleep(ctx, 300*time.Millisecond)
	return nil
}
