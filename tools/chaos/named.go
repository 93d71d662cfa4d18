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
func ElectionName(i int) string { return fmt.Sprintf("%s%d", electionPrefix, i) }

const electionPrefix = "chaos-"

// election is one named election of a run: its recorder and its apps, one
// per node (index node-1).
type election struct {
	name string
	rec  *history.Recorder
	apps []*appSlot
}

// appSlot is the app of one node in its elections: one election, or
// every one with Options.OneStream. A supervisor goroutine keeps it
// standing: it starts the app in the node's namespace whenever none runs,
// the node runs and the schedule does not hold it down, and records every
// change of its standing in each of its elections.
type appSlot struct {
	node int
	els  []*election
	name string // in its log's name

	mu       sync.Mutex
	proc     *candidate.Proc
	held     bool // killed by the schedule: not restarted until released
	standing bool // the last record says an app stands or is starting
}

// placeApps makes the apps' slots: one per node and election, or with
// OneStream one per node, standing in every election.
func (r *runner) placeApps() {
	for n := 1; n <= r.o.Nodes; n++ {
		if r.o.OneStream && len(r.named) > 0 {
			s := &appSlot{node: n, els: r.named, name: "all"}
			r.slots = append(r.slots, s)
			for _, el := range r.named {
				el.apps = append(el.apps, s)
			}
			continue
		}
		for _, el := range r.named {
			s := &appSlot{node: n, els: []*election{el}, name: el.name}
			r.slots = append(r.slots, s)
			el.apps = append(el.apps, s)
		}
	}
}

// record records a of s's app in each of its elections (s.mu held).
func (s *appSlot) record(a history.App) {
	for _, el := range s.els {
		el.rec.App(a)
	}
}

// pollLists starts one ListPoller for every named election; stop ends it.
func (r *runner) pollLists() (stop func()) {
	urls := map[int]string{}
	for _, nd := range r.c.Nodes {
		urls[nd.ID] = nd.HTTPURL
	}
	recs := map[string]*history.Recorder{}
	for _, el := range r.named {
		recs[el.name] = el.rec
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&history.ListPoller{Client: r.c.HTTPClient(), URLs: urls, Recs: recs, Prefix: electionPrefix}).Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// startApps starts the supervisors of every app; stop kills every app and
// waits for the supervisors.
func (r *runner) startApps() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range r.slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.supervise(ctx, s)
		}()
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// supervise keeps s's app standing until ctx ends, then kills it.
func (r *runner) supervise(ctx context.Context, s *appSlot) {
	nd := r.c.Node(s.node)
	var names []string
	for _, el := range s.els {
		names = append(names, el.name)
	}
	spec := candidate.Spec{
		// ip execs the command in place, and so does a Command that starts
		// with env: the process signalled is the app.
		Command:   append([]string{"ip", "netns", "exec", nd.NS}, r.o.AppCommand...),
		API:       nd.APIAddr,
		Elections: names,
		Value:     fmt.Sprintf("app-%d", s.node),
		Log:       filepath.Join(r.c.Dir(), fmt.Sprintf("app-%s-%d.log", s.name, s.node)),
		OneStream: r.o.OneStream,
		Placement: r.o.Placement,
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
		s.record(history.App{At: time.Now(), Node: s.node, Starting: true})
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
		s.record(history.App{At: time.Now(), Node: s.node, Standing: true})
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
		s.record(history.App{At: at, Node: s.node, Standing: false})
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
		for _, s := range r.slots {
			if r.c.State(s.node) == faultnet.Running && s.running() == nil {
				ok = false
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
// its leader with answers sent after since, all within one AgreeTimeout;
// it notes the ones that did not.
func (r *runner) agreedNamed(what string, since time.Time) {
	deadline := time.Now().Add(r.o.AgreeTimeout)
	var late []string
	for _, el := range r.named {
		if _, ok := r.agreedIn(el.rec, since, max(time.Until(deadline), 0)); !ok {
			late = append(late, el.name)
		}
	}
	switch {
	case len(late) > 3:
		r.note("%s: %d elections with no agreement within %v, among them %v", what, len(late), r.o.AgreeTimeout, late[:3])
	default:
		for _, name := range late {
			r.note("%s: %s: no agreement within %v", what, name, r.o.AgreeTimeout)
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
