package sim

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/electord/electord/election"
)

var (
	propCount = flag.Int("prop.count", 1000, "random fault schedules per algorithm")
	propSeed  = flag.Uint64("prop.seed", 1, "first seed; schedule i uses seed prop.seed+i")
	propTrace = flag.Bool("prop.trace", false, "trace every message (use with -prop.count=1)")
)

// L1Bound is the number of ticks within which a healed cluster of n nodes
// must agree on one leader, with the default timings (quorum mode's are
// twice as long; see election.Config).
func L1Bound(n int) int { return l1Bound(n, false) }

func l1Bound(n int, quorum bool) int {
	cfg := election.Config{ID: 1}
	if quorum {
		cfg.Quorum = n
	}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	lt, jitter, et, hop := 5, 5, 10, 1 // the defaults (see Config)
	if quorum {
		lt, jitter = 10, 10
	}
	return 6*(lt+jitter) + 4*(et+2*n*hop)
}

// schedule is one random fault schedule's outcome.
type schedule struct {
	n            int
	quorum       bool
	preempt      bool
	faults       int
	healedAfter  int // ticks from heal to agreement
	stableChurns int
	// followerFault is the fault run last that leaves the leader's side
	// the larger: a follower cut off or crashed, or (plain mode) a
	// minority of followers partitioned off.
	followerFault      string
	followerFaultTicks int
	// rivalAtHeal (plain mode): a node of the cut-off side led at a term
	// above the leader's when the fault healed, the case a blip is about.
	rivalAtHeal bool
}

func (sc schedule) String() string {
	return fmt.Sprintf("n=%d quorum=%v preempt=%v faults=%d follower-fault=%s/%d", sc.n, sc.quorum, sc.preempt, sc.faults, sc.followerFault, sc.followerFaultTicks)
}

// runSchedule runs one seeded random schedule of faults, then heals
// everything and checks L1 and that the agreed leader then stays put.
func runSchedule(algo string, seed uint64, trace func(string, ...any)) (schedule, error) {
	return runScheduleOn(algo, seed, trace, false, false, nil, nil)
}

// runScheduleOn runs schedule seed, its nodes ticked lazily (Options.Lazy)
// or every tick, with or without a host that vouches for members
// (Options.Vouch), their configs changed by tune if not nil; keep, if not
// nil, is given the simulation.
func runScheduleOn(algo string, seed uint64, trace func(string, ...any), lazy, vouch bool, tune func(*election.Config), keep **Sim) (schedule, error) {
	r := rand.New(rand.NewPCG(seed, 0xfa17))
	sc := schedule{n: 1 + r.IntN(7), quorum: r.IntN(2) == 0, preempt: r.IntN(4) == 0}
	opts := Options{N: sc.n, Algorithm: algo, Quorum: sc.quorum, Preempt: sc.preempt, Seed: seed, Lazy: lazy, Vouch: vouch, Tune: tune}
	if r.IntN(3) == 0 {
		for range sc.n {
			opts.Priorities = append(opts.Priorities, int64(r.IntN(3)))
		}
	}
	s, err := New(opts)
	if err != nil {
		return sc, err
	}
	if keep != nil {
		*keep = s
	}
	s.Trace = trace
	faults := &faultPicker{s: s, r: r, restartAt: map[election.NodeID]uint64{}}
	faultTicks := 100 + r.IntN(200)
	for range faultTicks {
		if err := faults.tick(); err != nil {
			return sc, err
		}
		if err := s.Step(); err != nil {
			return sc, err
		}
	}
	sc.faults = faults.count
	// Faults stop: every link heals and every node runs again.
	if err := s.Recover(); err != nil {
		return sc, err
	}
	start := s.Now()
	bound := l1Bound(sc.n, sc.quorum)
	ok, err := s.RunUntil(bound, func() bool { _, _, ok := s.Agreed(); return ok })
	if err != nil {
		return sc, err
	}
	if !ok {
		return sc, fmt.Errorf("L1 violated: no single agreed leader %d ticks after healing: %s", bound, s.Describe())
	}
	sc.healedAfter = int(s.Now() - start)
	// Once agreed on a healthy network, the leader stays. A suspicion formed
	// before the heal (heartbeats lost just before it) may still fire within
	// a leader timeout plus jitter, so the window starts after that.
	residual := 2 * (5 + 5)
	if sc.quorum {
		residual = 2 * (10 + 10)
	}
	if err := s.Run(max(0, residual-sc.healedAfter)); err != nil {
		return sc, err
	}
	if ok, err := s.RunUntil(bound, func() bool { _, _, ok := s.Agreed(); return ok }); err != nil || !ok {
		return sc, fmt.Errorf("L1 violated after residual suspicions: agreed=%v err=%v: %s", ok, err, s.Describe())
	}
	leader, term, _ := s.Agreed()
	if err := s.Run(3 * bound); err != nil {
		return sc, err
	}
	if l, t, ok := s.Agreed(); !ok || l != leader || t != term {
		return sc, fmt.Errorf("stability violated: leader %d term %v changed to %d %v (agreed=%v) on a healthy network: %s",
			leader, term, l, t, ok, s.Describe())
	}
	if sc.quorum && sc.n >= 3 {
		// Quorum mode: a fault that touches one follower only (cut off,
		// or crashed and restarted) moves neither the leader nor its term
		// (issue 10, item 4; the chaos checker's follower-fault rule): the
		// majority's leader keeps its lease, and the follower's campaigns
		// of its own, at terms of its own, are refused when it returns.
		f, _ := faults.pick(faults.ids(func(id election.NodeID) bool { return id != leader }))
		crash := r.IntN(3) == 0
		sc.followerFault = "isolate"
		if crash {
			sc.followerFault = "crash"
			s.Crash(f)
		} else {
			s.Isolate(f)
		}
		sc.followerFaultTicks = 1 + r.IntN(2*bound)
		moved := func() (election.NodeID, election.Term, bool) {
			for i := 1; i <= sc.n; i++ {
				if id := election.NodeID(i); id != f {
					if st := s.Node(id).Status(); st.Leader != leader || st.LeaderTerm != term {
						return id, st.LeaderTerm, true
					}
				}
			}
			return 0, 0, false
		}
		for range sc.followerFaultTicks {
			if err := s.Step(); err != nil {
				return sc, err
			}
			if id, t, bad := moved(); bad {
				return sc, fmt.Errorf("stability violated: %s of follower %d moved node %d off leader %d term %v (to term %v) during the fault: %s",
					sc.followerFault, f, id, leader, term, t, s.Describe())
			}
		}
		if !crash && r.IntN(2) == 0 {
			// The follower learns the leader is alive last (LateView).
			s.LateView(f, leader, r.IntN(4*sc.n))
		}
		s.Heal()
		if err := s.Restart(f); err != nil {
			return sc, err
		}
		if err := s.Run(3 * bound); err != nil {
			return sc, err
		}
		if l, t, ok := s.Agreed(); !ok || l != leader || t != term {
			return sc, fmt.Errorf("stability violated: after the %s of follower %d for %d ticks, leader %d term %v changed to %d %v (agreed=%v): %s",
				sc.followerFault, f, sc.followerFaultTicks, leader, term, l, t, ok, s.Describe())
		}
	} else if !sc.quorum && sc.n >= 3 {
		if err := blipPhase(s, r, &sc, leader, term, bound); err != nil {
			return sc, err
		}
	}
	return sc, nil
}

// blipPhase is plain mode's follower-fault phase: a fault that leaves the
// leader on the strictly larger side (one follower cut off or crashed, or a
// minority of followers partitioned off, each side electing its own leader)
// must not move the leader. During the fault the larger side keeps it at
// its term; from the heal on no node of the larger side names another
// leader (its term may rise, never go back: S3), and after 3·L1Bound ticks
// every node agrees on it.
func blipPhase(s *Sim, r *rand.Rand, sc *schedule, leader election.NodeID, term election.Term, bound int) error {
	var followers []election.NodeID
	for i := 1; i <= sc.n; i++ {
		if id := election.NodeID(i); id != leader {
			followers = append(followers, id)
		}
	}
	r.Shuffle(len(followers), func(i, j int) { followers[i], followers[j] = followers[j], followers[i] })
	// Up to the largest minority: k < n-k.
	cutOff := followers[:1+r.IntN((sc.n-1)/2)]
	var larger []election.NodeID
	for i := 1; i <= sc.n; i++ {
		if id := election.NodeID(i); !slices.Contains(cutOff, id) {
			larger = append(larger, id)
		}
	}
	crash := len(cutOff) == 1 && r.IntN(3) == 0
	switch {
	case crash:
		sc.followerFault = fmt.Sprintf("crash%v", cutOff)
		s.Crash(cutOff[0])
	default:
		sc.followerFault = fmt.Sprintf("partition%v", cutOff)
		s.Partition(cutOff, larger)
	}
	sc.followerFaultTicks = 1 + r.IntN(2*bound)
	moved := func(minTerm election.Term, exact bool) (election.NodeID, election.Status, bool) {
		for _, id := range larger {
			st := s.Node(id).Status()
			if st.Leader != leader || st.LeaderTerm < minTerm || (exact && st.LeaderTerm != minTerm) {
				return id, st, true
			}
		}
		return 0, election.Status{}, false
	}
	for range sc.followerFaultTicks {
		if err := s.Step(); err != nil {
			return err
		}
		if id, st, bad := moved(term, true); bad {
			return fmt.Errorf("stability violated: %s moved node %d of the larger side off leader %d term %v (to %d at %v) during the fault: %s",
				sc.followerFault, id, leader, term, st.Leader, st.LeaderTerm, s.Describe())
		}
	}
	for _, id := range cutOff {
		if st := s.Node(id).Status(); s.Up(id) && st.Role == election.RoleLeader && st.LeaderTerm > term {
			sc.rivalAtHeal = true
		}
	}
	if !crash && r.IntN(2) == 0 {
		// The cut-off side learns the leader is alive last (LateView).
		for _, id := range cutOff {
			s.LateView(id, leader, r.IntN(4*sc.n))
		}
	}
	s.Heal()
	if crash {
		if err := s.Restart(cutOff[0]); err != nil {
			return err
		}
	}
	for range 3 * bound {
		if err := s.Step(); err != nil {
			return err
		}
		if id, st, bad := moved(term, false); bad {
			return fmt.Errorf("stability violated: after the %s for %d ticks, node %d of the larger side moved off leader %d (term %v) to %d at %v: %s",
				sc.followerFault, sc.followerFaultTicks, id, leader, term, st.Leader, st.LeaderTerm, s.Describe())
		}
	}
	if l, t, ok := s.Agreed(); !ok || l != leader || t < term {
		return fmt.Errorf("stability violated: after the %s for %d ticks, leader %d term %v changed to %d %v (agreed=%v): %s",
			sc.followerFault, sc.followerFaultTicks, leader, term, l, t, ok, s.Describe())
	}
	return nil
}

// faultPicker draws a property schedule's random faults, one call a tick:
// crashes, restarts, partitions, one-way cuts, bridges, heals, loss,
// delays, flapping nodes and isolation.
type faultPicker struct {
	s         *Sim
	r         *rand.Rand
	restartAt map[election.NodeID]uint64 // a flapping node's next restart
	count     int
}

func (f *faultPicker) ids(pred func(election.NodeID) bool) []election.NodeID {
	var out []election.NodeID
	for i := 1; i <= f.s.N(); i++ {
		if pred(election.NodeID(i)) {
			out = append(out, election.NodeID(i))
		}
	}
	return out
}

func (f *faultPicker) pick(from []election.NodeID) (election.NodeID, bool) {
	if len(from) == 0 {
		return 0, false
	}
	return from[f.r.IntN(len(from))], true
}

func (f *faultPicker) split() ([]election.NodeID, []election.NodeID) {
	all := f.ids(func(election.NodeID) bool { return true })
	f.r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	k := f.r.IntN(len(all) + 1)
	return all[:k], all[k:]
}

// tick injects a fault one time in eight, then restarts the flapping nodes
// that are due.
func (f *faultPicker) tick() error {
	s, r := f.s, f.r
	if r.IntN(8) == 0 {
		f.count++
		switch r.IntN(10) {
		case 0: // crash
			if id, ok := f.pick(f.ids(s.Up)); ok {
				s.Crash(id)
			}
		case 1: // restart, keeping the persisted term
			if id, ok := f.pick(f.ids(func(id election.NodeID) bool { return !s.Up(id) })); ok {
				if err := s.Restart(id); err != nil {
					return err
				}
			}
		case 2: // symmetric partition
			a, b := f.split()
			s.Partition(a, b)
		case 3: // one-way cut
			a, _ := f.pick(f.ids(func(election.NodeID) bool { return true }))
			b, _ := f.pick(f.ids(func(election.NodeID) bool { return true }))
			if a != b {
				s.Cut(a, b)
			}
		case 4: // a bridge sees both halves
			a, b := f.split()
			if len(a) > 1 {
				s.Bridge(a[0], a[1:], b)
			}
		case 5: // links heal
			s.cut, s.changed = map[[2]election.NodeID]bool{}, true
		case 6: // lossy links
			s.DropRate = float64(r.IntN(4)) / 10
		case 7: // delays and reordering
			s.MaxDelay = r.IntN(4)
		case 8: // a flapping node: down and up again quickly, several times
			if id, ok := f.pick(f.ids(s.Up)); ok {
				s.Crash(id)
				f.restartAt[id] = s.Now() + uint64(1+r.IntN(4))
			}
		case 9: // isolate one node
			if id, ok := f.pick(f.ids(s.Up)); ok {
				s.Isolate(id)
			}
		}
	}
	// In id order: map order would make a seed's schedule differ from
	// run to run (each restart draws from the random sources).
	for _, id := range slices.Sorted(maps.Keys(f.restartAt)) {
		if at := f.restartAt[id]; s.Now() >= at {
			delete(f.restartAt, id)
			if err := s.Restart(id); err != nil {
				return err
			}
			if r.IntN(2) == 0 { // flap again
				s.Crash(id)
				f.restartAt[id] = s.Now() + uint64(1+r.IntN(4))
			}
		}
	}
	return nil
}

func TestPropertyRandomFaultSchedules(t *testing.T) {
	for _, algo := range []string{"ring", "bully"} {
		t.Run(algo, func(t *testing.T) {
			var worst, total, blips, rivals int
			var heal []int
			byN := map[string]int{}
			for i := range *propCount {
				seed := *propSeed + uint64(i)
				var trace func(string, ...any)
				if *propTrace {
					trace = t.Logf
				}
				sc, err := runSchedule(algo, seed, trace)
				if err != nil {
					t.Fatalf("%s seed %d (%v): %v\nreproduce: go test ./election/sim -run 'TestPropertyRandomFaultSchedules/%s' -prop.seed=%d -prop.count=1 -prop.trace",
						algo, seed, sc, err, algo, seed)
				}
				total++
				if !sc.quorum && sc.followerFault != "" {
					blips++
					if sc.rivalAtHeal {
						rivals++
					}
				}
				heal = append(heal, sc.healedAfter)
				worst = max(worst, sc.healedAfter)
				byN[fmt.Sprintf("n=%d/q=%v", sc.n, sc.quorum)]++
			}
			slices.Sort(heal)
			t.Logf("%s: %d schedules, seeds %d..%d, 0 violations of S1/S2/S3/Q1/Q2/L1/stability; ticks from heal to agreement p50=%d p99=%d max=%d",
				algo, total, *propSeed, *propSeed+uint64(total)-1, heal[len(heal)/2], heal[len(heal)*99/100], worst)
			t.Logf("%s: schedules by size and mode: %v", algo, byN)
			t.Logf("%s: plain-mode follower faults %d, of which %d healed with the cut-off side led at a term above the leader's", algo, blips, rivals)
		})
	}
}
