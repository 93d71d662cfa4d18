package membership

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hashicorp/memberlist"
)

// The retry-join policy's constants (see RetryJoin); the rejoin periods
// come from the preset (Preset.RejoinEvery, Preset.RejoinMaxBackoff).
const (
	// RetryJoinEvery is how often seeds are tried until one answers.
	RetryJoinEvery = 500 * time.Millisecond
	// RetryJoinWarnAfter is how long seeds may not answer before it is
	// logged as a warning: nodes started together (a dev cluster, a
	// StatefulSet) find their seeds down for a moment.
	RetryJoinWarnAfter = 5 * time.Second
	// RejoinPerRound bounds the joins in flight at once, so a node that
	// knew many members, now unreachable, does bounded work per round.
	RejoinPerRound = 8
	// ForgetKnownAfter is how long a known member may stay away (neither
	// alive in gossip nor answering a join) before it is no longer tried.
	// Configured seeds are never forgotten.
	ForgetKnownAfter = 24 * time.Hour
	// ShortSyncFirst and ShortSyncMax bound the back-off of the state syncs
	// of a node that has joined but sees fewer live members than
	// Config.BootstrapExpect (see RetryJoin): the first comes
	// ShortSyncFirst after the join, each next one twice as late, up to
	// ShortSyncMax; a sync after which the view has grown is followed by
	// the next ShortSyncFirst later again.
	ShortSyncFirst = 1 * time.Second
	ShortSyncMax   = 8 * time.Second
)

// RetryJoin keeps this node connected to its seeds (Config.Join) and to
// every member it has known, like Consul's retry_join and Serf's reconnect.
// It tries the seeds at once, reports Synced when that try ends (every
// member it learnt of was reported first), and then in the background every
// RetryJoinEvery until one answers (a seed may start after this node). From
// then on, every Preset.RejoinEvery, it joins again every address missing
// from its live view: the configured seeds (DNS names resolved again each
// round, so a Service's new pods are found) and every member ever seen alive
// at its last gossip address. That heals any partition, however long, once
// links are back: gossip declared the other side dead and stopped talking
// to it, and a join makes the two sides exchange state again.
//
// A node that has joined but sees fewer live members than
// Config.BootstrapExpect (a cluster forming) syncs state with a random live
// member (the seeds while it knows none) after ShortSyncFirst, then twice as
// late each time up to ShortSyncMax, until it has seen that many once; while
// its view keeps growing (the others are still starting) the period stays
// at ShortSyncFirst: a node that joined early learns of the later ones from
// a member a second after they joined, not 4 or 8 seconds later. A
// state sync (memberlist's push/pull) brings every member the other side
// knows; memberlist's own push/pull comes every 30 s and more (it stretches
// the period above 32 members), and a node that missed the join broadcast
// of a member learns of it only then. The target is random, not the seed,
// and the first sync waits a second: 128 nodes syncing with their one seed
// every few hundred milliseconds as they start overran its push/pull limit
// and its gossip queue, and gossip declared live members dead. While a node is short of the count it does not campaign,
// and a ring node refuses Elections, so a late view delays the first
// election by as long as it stays late.
//
// Each address backs off on its own: after a failed join it waits
// RejoinEvery, then twice that, up to Preset.RejoinMaxBackoff (with
// jitter), and at most RejoinPerRound joins are in flight, so members gone
// for good cost little. A member away longer than ForgetKnownAfter is
// dropped. A seed address that is no member's gossip address (a load
// balancer in front of the nodes) is joined every round. It stops at
// Shutdown. Call it at most once.
func (m *Membership) RetryJoin() {
	preset, _ := PresetNamed(m.cfg.Preset) // New checked it
	retryJoin{m: m, seeds: m.cfg.Join, log: m.log, retry: RetryJoinEvery,
		rejoin: preset.RejoinEvery, maxBackoff: preset.RejoinMaxBackoff, perRound: RejoinPerRound,
		shortFirst: ShortSyncFirst, shortMax: ShortSyncMax}.start(m.stopRetry)
}

// knownMember is a remote node once seen alive.
type knownMember struct {
	addr      string
	lastAlive time.Time
}

// noteAliveLocked records that name is alive at addr.
func (m *Membership) noteAliveLocked(name, addr string) {
	m.known[name] = &knownMember{addr: addr, lastAlive: time.Now()}
}

// rejoinTargets lists the gossip addresses to join again: the seeds'
// addresses (resolved now) and the known members' last addresses, less this
// node's and every live member's.
func (m *Membership) rejoinTargets(ctx context.Context) []string {
	var addrs []string
	for _, s := range m.cfg.Join {
		as, err := m.resolveSeed(ctx, s)
		if err != nil {
			m.log.Debug("cannot resolve seed", "seed", s, "err", err)
			continue
		}
		addrs = append(addrs, as...)
	}
	now := time.Now()
	m.mu.Lock()
	live := map[string]bool{m.local: true, m.bound: true}
	for _, mb := range m.members {
		live[mb.addr] = true
	}
	for name, k := range m.known {
		switch {
		case m.members[name] != nil:
			k.lastAlive = now
		case now.Sub(k.lastAlive) > ForgetKnownAfter:
			delete(m.known, name)
		default:
			addrs = append(addrs, k.addr)
		}
	}
	m.mu.Unlock()
	out := addrs[:0]
	for _, a := range addrs {
		if !live[a] && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// joinAddr joins the node at one gossip address.
func (m *Membership) joinAddr(addr string) error {
	m.life.Lock()
	done := m.shutdown || m.left
	m.life.Unlock()
	if done {
		return errors.New("membership: join after leave or shutdown")
	}
	err := m.sync(context.Background(), addr)
	if err == nil {
		m.mu.Lock()
		for _, k := range m.known {
			if k.addr == addr {
				k.lastAlive = time.Now()
			}
		}
		m.mu.Unlock()
	}
	return err
}

// short reports whether this node sees fewer live members (itself
// included) than Config.BootstrapExpect and never saw that many. It latches:
// once the count was reached, a member's death does not start the syncs
// again (retry-join's rounds heal what is lost later).
func (m *Membership) short() bool {
	if m.cfg.BootstrapExpect <= 1 || m.formed.Load() {
		return false
	}
	n := 1
	m.mu.Lock()
	for _, mb := range m.members {
		if mb.admitted {
			n++
		}
	}
	m.mu.Unlock()
	if n >= m.cfg.BootstrapExpect {
		m.formed.Store(true)
		return false
	}
	return true
}

// anyMember returns the gossip address of a live member picked at random,
// or "" if there is none.
func (m *Membership) anyMember() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var addrs []string
	for _, mb := range m.members {
		if mb.admitted {
			addrs = append(addrs, mb.addr)
		}
	}
	if len(addrs) == 0 {
		return ""
	}
	return addrs[rand.N(len(addrs))]
}

// joiner is what the retry-join policy needs of a Membership.
type joiner interface {
	Join(seeds []string) (int, error)
	rejoinTargets(ctx context.Context) []string
	joinAddr(addr string) error
	short() bool
	anyMember() string
	admittedCount() int
	synced()
}

// retryJoin is the policy of RetryJoin, with its periods as parameters.
type retryJoin struct {
	m                         joiner
	seeds                     []string
	log                       *slog.Logger
	retry, rejoin, maxBackoff time.Duration
	perRound                  int
	// shortFirst, shortMax: the back-off of the syncs while short (see
	// ShortSyncFirst).
	shortFirst, shortMax time.Duration
}

// backoff is one address's state between rounds.
type backoff struct {
	fails    int
	next     time.Time // not tried before
	inFlight bool
}

type joinResult struct {
	addr string
	err  error
}

// start makes the first attempt now, then retries in a goroutine that ends
// when stop is closed.
func (r retryJoin) start(stop <-chan struct{}) {
	began := time.Now()
	joined := len(r.seeds) == 0 || r.try()
	r.m.synced()
	go func() {
		warned := false
		state := map[string]*backoff{}
		results := make(chan joinResult, r.perRound)
		inFlight := 0
		syncs := shortSchedule{first: r.shortFirst, max: r.shortMax}
		// next is the wait after a successful join or sync: the next sync
		// while short of the expected members, else the next rejoin round.
		next := func() time.Duration {
			if !r.m.short() {
				return r.jitter(r.rejoin)
			}
			return r.jitter(syncs.next(r.m.admittedCount()))
		}
		timer := time.NewTimer(r.retry)
		if joined {
			timer.Reset(next())
		}
		defer timer.Stop()
		for {
			select {
			case <-stop:
				return
			case res := <-results:
				inFlight--
				r.done(state, res)
				continue
			case <-timer.C:
			}
			if !joined {
				if joined = r.try(); joined {
					r.log.Info("joined gossip through a seed", "join", r.seeds)
					timer.Reset(next())
				} else {
					if !warned && time.Since(began) >= RetryJoinWarnAfter {
						warned = true
						r.log.Warn("no gossip seed answered for "+RetryJoinWarnAfter.String()+"; still retrying every "+r.retry.String(), "join", r.seeds)
					}
					timer.Reset(r.retry)
				}
				continue
			}
			if r.m.short() {
				// Fewer members than the cluster starts with: sync the whole
				// view from a live member now (a failed sync is retried the
				// same way; rejoin rounds wait until the view is complete).
				if a := r.m.anyMember(); a != "" {
					if err := r.m.joinAddr(a); err != nil {
						r.log.Debug("state sync while short of bootstrap-expect failed", "addr", a, "err", err)
					}
				} else {
					r.try()
				}
				timer.Reset(next())
				continue
			}
			inFlight += r.round(state, results, r.perRound-inFlight)
			timer.Reset(r.jitter(r.rejoin))
		}
	}()
}

// shortSchedule is the back-off of the state syncs of a node short of
// Config.BootstrapExpect: first, then twice as long each time up to max,
// and first again whenever the view has grown since the last plan. A view
// that grows means the cluster is still starting: the members started
// since the last sync are known to the others already, and waiting 4 or 8
// seconds to hear of them delays the first election as long.
type shortSchedule struct {
	first, max time.Duration
	wait       time.Duration // the next wait unless the view grows; 0: first
	seen       int           // live members when the last wait was planned
}

// next is the wait before the next sync, for a view of live members.
func (s *shortSchedule) next(live int) time.Duration {
	if s.wait == 0 || live > s.seen {
		s.wait = s.first
	}
	s.seen = max(s.seen, live)
	w := s.wait
	s.wait = min(2*s.wait, s.max)
	return w
}

// round starts joins (at most room) of the missing addresses whose back-off
// has run out, and forgets the state of addresses no longer missing.
func (r retryJoin) round(state map[string]*backoff, results chan<- joinResult, room int) int {
	ctx, cancel := context.WithTimeout(context.Background(), max(r.rejoin, time.Second))
	targets := r.m.rejoinTargets(ctx)
	cancel()
	for a, b := range state {
		if !b.inFlight && !slices.Contains(targets, a) {
			delete(state, a)
		}
	}
	now := time.Now()
	started := 0
	for _, a := range targets {
		if started >= room {
			break
		}
		b := state[a]
		if b == nil {
			b = &backoff{}
			state[a] = b
		}
		if b.inFlight || now.Before(b.next) {
			continue
		}
		b.inFlight = true
		started++
		go func() { results <- joinResult{a, r.m.joinAddr(a)} }()
	}
	return started
}

// done records one join's result.
func (r retryJoin) done(state map[string]*backoff, res joinResult) {
	b := state[res.addr]
	if b == nil {
		b = &backoff{}
		state[res.addr] = b
	}
	b.inFlight = false
	if res.err == nil {
		r.log.Debug("joined a missing member again", "addr", res.addr)
		delete(state, res.addr)
		return
	}
	b.fails++
	wait := r.rejoin << min(b.fails-1, 20)
	if wait > r.maxBackoff || wait <= 0 {
		wait = r.maxBackoff
	}
	b.next = time.Now().Add(r.jitter(wait))
	r.log.Debug("missing member did not answer", "addr", res.addr, "fails", b.fails, "err", res.err)
}

// jitter spreads d by up to ±10%, so nodes that lost the same members do not
// retry in step.
func (r retryJoin) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d - d/10 + rand.N(d/5+1)
}

func (r retryJoin) try() bool {
	n, err := r.m.Join(r.seeds)
	if err != nil || n == 0 {
		r.log.Debug("no gossip seed answered yet", "join", r.seeds, "err", err)
		return false
	}
	return true
}

// wrapNetTransport binds memberlist's own network transport on mc's bind
// address and installs wrap around it.
func wrapNetTransport(mc *memberlist.Config, wrap func(memberlist.NodeAwareTransport) memberlist.NodeAwareTransport) error {
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{mc.BindAddr}, BindPort: mc.BindPort, Logger: mc.Logger})
	if err != nil {
		return err
	}
	if mc.BindPort == 0 {
		port := nt.GetAutoBindPort()
		if mc.AdvertisePort == 0 {
			mc.AdvertisePort = port
		}
		mc.BindPort = port
	}
	mc.Transport = wrap(nt)
	return nil
}
