package sim

import (
	"errors"
	"flag"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/algorithms"
)

var (
	scenarioSeeds = flag.Int("scenario.seeds", 3, "seeds each scenario runs with (seed 1..n)")
	scenarioTrace = flag.Int("scenario.trace", 40, "trace lines kept and printed on a scenario failure")
)

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, st := range bi.Settings {
			if st.Key == "-race" {
				return st.Value == "true"
			}
		}
	}
	return false
}

// every registered algorithm
var allAlgorithms = algorithms.Names()

// harness wraps a Sim with assertions whose failures carry the seed, the
// state of every node and the tail of the message trace.
type harness struct {
	*Sim
	t     *testing.T
	algo  string
	seed  uint64
	lines []string
	terms map[election.NodeID]election.Term // highest term seen per node (explicit S2)
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New(%+v): %v", opts, err)
	}
	h := &harness{Sim: s, t: t, algo: opts.Algorithm, seed: opts.Seed, terms: map[election.NodeID]election.Term{}}
	if *scenarioTrace > 0 && opts.N <= 50 {
		s.Trace = func(format string, a ...any) {
			if len(h.lines) >= *scenarioTrace {
				h.lines = h.lines[1:]
			}
			h.lines = append(h.lines, fmt.Sprintf(format, a...))
		}
	}
	return h
}

func (h *harness) fatalf(format string, a ...any) {
	h.t.Helper()
	h.t.Fatalf("%s seed=%d tick=%d: %s\nstate: %s\nlast %d trace lines:\n  %s",
		h.algo, h.seed, h.Now(), fmt.Sprintf(format, a...), h.Describe(), len(h.lines), strings.Join(h.lines, "\n  "))
}

// observeTerms asserts S2 explicitly: no live node's term is ever below the
// highest term it was seen with, across crashes and restarts too.
func (h *harness) observeTerms() {
	h.t.Helper()
	for i := 1; i <= h.N(); i++ {
		id := election.NodeID(i)
		if !h.Up(id) {
			continue
		}
		st := h.Node(id).Status()
		if st.Term < h.terms[id] {
			h.fatalf("node %d's term went back from %v to %v", id, h.terms[id], st.Term)
		}
		h.terms[id] = st.Term
	}
}

// until steps until cond holds, failing after deadline ticks or on a checker
// violation.
func (h *harness) until(deadline int, what string, cond func() bool) {
	h.t.Helper()
	ok, err := h.RunUntil(deadline, func() bool { h.observeTerms(); return cond() })
	if err != nil {
		h.fatalf("checker while waiting for %s: %v", what, err)
	}
	if !ok {
		h.fatalf("%s: not reached within %d ticks", what, deadline)
	}
}

// never steps window ticks and fails as soon as bad holds.
func (h *harness) never(window int, what string, bad func() bool) {
	h.t.Helper()
	ok, err := h.RunUntil(window, func() bool { h.observeTerms(); return bad() })
	if err != nil {
		h.fatalf("checker during %s window: %v", what, err)
	}
	if ok {
		h.fatalf("%s (within a %d-tick window)", what, window)
	}
}

// agree waits for every live node to agree on one leader and returns it.
func (h *harness) agree(deadline int, what string) (election.NodeID, election.Term) {
	h.t.Helper()
	h.until(deadline, what, func() bool { _, _, ok := h.Agreed(); return ok })
	l, term, _ := h.Agreed()
	if ls := h.Leaders(); len(ls) != 1 || ls[0] != l {
		h.fatalf("%s: agreed on %d but nodes in RoleLeader are %v", what, l, ls)
	}
	if !term.OwnedBy(l) {
		h.fatalf("%s: leader %d leads term %v it does not own", what, l, term)
	}
	return l, term
}

// agreeOn waits for agreement on want and returns the term.
func (h *harness) agreeOn(deadline int, want election.NodeID, what string) election.Term {
	h.t.Helper()
	h.until(deadline, fmt.Sprintf("%s: agreement on %d", what, want), func() bool {
		l, _, ok := h.Agreed()
		return ok && l == want
	})
	_, term := h.agree(1, what)
	return term
}

// groupAgreed is Agreed restricted to the live nodes in ids.
func (h *harness) groupAgreed(ids ...election.NodeID) (election.NodeID, election.Term, bool) {
	var leader election.NodeID
	var term election.Term
	for _, id := range ids {
		if !h.Up(id) {
			continue
		}
		st := h.Node(id).Status()
		if st.Leader == 0 || (leader != 0 && (st.Leader != leader || st.LeaderTerm != term)) {
			return 0, 0, false
		}
		leader, term = st.Leader, st.LeaderTerm
	}
	if leader == 0 || !slices.Contains(ids, leader) || !h.Up(leader) || h.Node(leader).Status().Role != election.RoleLeader {
		return 0, 0, false
	}
	return leader, term, true
}

// leaderless reports whether no node in ids leads or believes in a leader.
func (h *harness) leaderless(ids ...election.NodeID) bool {
	for _, id := range ids {
		if h.Up(id) && (h.Node(id).Status().Role == election.RoleLeader || h.Node(id).Status().Leader != 0) {
			return false
		}
	}
	return true
}

// run steps ticks ticks, failing on a checker violation.
func (h *harness) run(ticks int) {
	h.t.Helper()
	for range ticks {
		if err := h.Step(); err != nil {
			h.fatalf("checker: %v", err)
		}
		h.observeTerms()
	}
}

func (h *harness) do(id election.NodeID, f func(election.StateMachine) error) error {
	return h.Do(id, f)
}

func (h *harness) counts() string {
	var parts []string
	for typ := election.MsgElection; typ <= election.MsgTimeoutNow; typ++ {
		if c := h.Counts[typ]; c > 0 {
			parts = append(parts, fmt.Sprintf("%v=%d", typ, c))
		}
	}
	return strings.Join(parts, " ")
}

func ids(n int) []election.NodeID {
	out := make([]election.NodeID, n)
	for i := range out {
		out[i] = election.NodeID(i + 1)
	}
	return out
}

type scenario struct {
	name string
	opts Options // N, Quorum, Preempt, Priorities; Algorithm and Seed are filled in
	run  func(h *harness)
}

var scenarios = []scenario{
	{name: "initial-election", opts: Options{N: 5}, run: func(h *harness) {
		l, term := h.agree(L1Bound(5), "cold start")
		if l != 5 || !term.OwnedBy(5) {
			h.fatalf("leader %d term %v, want 5 with a term owned by 5", l, term)
		}
		for _, id := range ids(5) {
			st := h.Node(id).Status()
			want := election.RoleFollower
			if id == 5 {
				want = election.RoleLeader
			}
			if st.Role != want || st.Leader != 5 || st.LeaderTerm != term {
				h.fatalf("node %d: %v leader=%d term=%v, want %v leader=5 term=%v", id, st.Role, st.Leader, st.LeaderTerm, want, term)
			}
		}
		h.t.Logf("leader 5 term %v after %d ticks, %d messages (%s)", term, h.Now(), h.Total(), h.counts())
	}},
	{name: "initial-election-priority", opts: Options{N: 5, Priorities: []int64{0, 10, 0, 0, 0}}, run: func(h *harness) {
		term := h.agreeOn(L1Bound(5), 2, "cold start, node 2 has the highest priority")
		if !term.OwnedBy(2) {
			h.fatalf("term %v not owned by 2", term)
		}
	}},
	{name: "leader-crash", opts: Options{N: 5}, run: func(h *harness) {
		before := h.agreeOn(L1Bound(5), 5, "cold start")
		h.Crash(5)
		at := h.Now()
		after := h.agreeOn(L1Bound(5), 4, "after crashing leader 5")
		if after <= before || !after.OwnedBy(4) {
			h.fatalf("term after crash %v, want above %v and owned by 4", after, before)
		}
		h.t.Logf("4 leads term %v, %d ticks after 5 crashed", after, h.Now()-at)
	}},
	{name: "crash-during-election", opts: Options{N: 5}, run: func(h *harness) {
		// No leader yet: node 1 starts an election at tick 0, and the
		// would-be winner 5 crashes as that first Election goes on the wire.
		var first *election.Message
		h.Hook = func(m election.Message) bool {
			if first == nil && m.Type == election.MsgElection {
				first = &m
			}
			return true
		}
		if err := h.do(1, func(c election.StateMachine) error { c.Campaign(); return nil }); err != nil {
			h.fatalf("Campaign on 1: %v", err)
		}
		h.Hook = nil
		if first == nil || h.Node(1).Status().Role != election.RoleElecting || len(h.Leaders()) != 0 {
			h.fatalf("no election underway after Campaign on 1 (first Election %v, leaders %v)", first, h.Leaders())
		}
		h.Crash(5)
		term := h.agreeOn(L1Bound(5), 4, "after crashing 5 as 1's Election went out")
		h.t.Logf("4 leads term %v at tick %d", term, h.Now())
	}},
	{name: "crash-during-natural-election", opts: Options{N: 5}, run: func(h *harness) {
		// Cold start; crash 5 as soon as the first Election of the natural
		// start-up is on the wire, before anyone received it. (Under bully
		// the top node may campaign first and win with no Election at all;
		// that seed then has no election to interrupt.)
		var first *election.Message
		h.Hook = func(m election.Message) bool {
			if first == nil && m.Type == election.MsgElection {
				first = &m
			}
			return true
		}
		h.until(L1Bound(5), "a first Election or a leader", func() bool { return first != nil || len(h.Leaders()) > 0 })
		h.Hook = nil
		if first == nil || len(h.Leaders()) > 0 {
			h.t.Logf("%s seed %d: %v won before any Election was sent; no election to interrupt", h.algo, h.seed, h.Leaders())
			return
		}
		h.t.Logf("first Election %d->%d term %v at tick %d; crashing 5", first.From, first.To, first.Term, h.Now())
		h.Crash(5)
		h.agreeOn(L1Bound(5), 4, "after crashing 5 mid-election")
	}},
	{name: "crash-winner-while-electing", opts: Options{N: 5}, run: func(h *harness) {
		// Node 1 starts an election; crash 5 as soon as it takes part (ring:
		// it forwarded the Election; bully: it answered, and has just won).
		var touched bool
		h.Hook = func(m election.Message) bool {
			if m.From == 5 && (m.Type == election.MsgElection || m.Type == election.MsgAnswer) {
				touched = true
			}
			return true
		}
		if err := h.do(1, func(c election.StateMachine) error { c.Campaign(); return nil }); err != nil {
			h.fatalf("Campaign on 1: %v", err)
		}
		h.until(L1Bound(5), "5 taking part in 1's election", func() bool { return touched })
		h.Hook = nil
		h.Crash(5)
		h.agreeOn(L1Bound(5), 4, "after crashing 5 while it was electing")
	}},
	{name: "concurrent-initiators", opts: Options{N: 5}, run: func(h *harness) {
		before := h.agreeOn(L1Bound(5), 5, "cold start")
		h.run(20) // let heartbeats settle
		h.Crash(5)
		h.ResetCounts()
		for _, id := range ids(4) {
			if err := h.do(id, func(c election.StateMachine) error { c.Campaign(); return nil }); err != nil {
				h.fatalf("Campaign on %d: %v", id, err)
			}
		}
		start := h.Now()
		l, term := h.agree(L1Bound(5), "after 4 concurrent campaigns")
		if l != 4 || term <= before {
			h.fatalf("leader %d term %v, want 4 above %v", l, term, before)
		}
		atAgree := h.Total(election.MsgElection, election.MsgCoordinator)
		summary := h.counts()
		// Let any suppressed or late Elections of that round drain.
		h.never(30, "leadership changed after the concurrent round", func() bool {
			l2, t2, ok := h.Agreed()
			return !ok || l2 != l || t2 != term
		})
		total := h.Total(election.MsgElection, election.MsgCoordinator)
		h.t.Logf("%s: 4 initiators, %d ticks to agree; Election+Coordinator=%d at agreement (%s), %d after 30 more ticks",
			h.algo, h.Now()-30-start, atAgree, summary, total)
		if h.algo == "ring" && total > 3*h.N() {
			h.fatalf("ring used %d Election+Coordinator messages for one round, want <= 3n = %d (%s)", total, 3*h.N(), h.counts())
		}
	}},
	{name: "crash-seen-by-all-at-once", opts: Options{N: 64}, run: func(h *harness) {
		// The leader's process dies and every follower learns it in the same
		// tick (its kernel refuses their connections: EventLeaderTimeout
		// everywhere). Bully let all 63 campaign at once, O(n^2) messages (at
		// 128 real processes the storm never settled); the highest survivor
		// now goes first and the others wait their rank.
		h.agreeOn(L1Bound(64), 64, "cold start")
		h.run(20)
		h.Crash(64)
		h.ResetCounts()
		for _, id := range ids(63) {
			if err := h.do(id, func(c election.StateMachine) error {
				c.Observe(election.Event{Type: election.EventLeaderTimeout})
				return nil
			}); err != nil {
				h.fatalf("leader timeout on %d: %v", id, err)
			}
		}
		h.agreeOn(L1Bound(64), 63, "after every follower saw the crash at once")
		total := h.Total(election.MsgElection, election.MsgAnswer, election.MsgCoordinator)
		h.t.Logf("%s: %d Election+Answer+Coordinator messages for 63 simultaneous suspicions (%s)", h.algo, total, h.counts())
		if total > 8*h.N() {
			h.fatalf("%d election messages after a crash seen by all, want O(n) <= %d (%s)", total, 8*h.N(), h.counts())
		}
	}},
	{name: "sticky-leader", opts: Options{N: 5}, run: func(h *harness) {
		h.agreeOn(L1Bound(5), 5, "cold start")
		h.Crash(5)
		term := h.agreeOn(L1Bound(5), 4, "after crashing 5")
		if err := h.Restart(5); err != nil {
			h.fatalf("Restart(5): %v", err)
		}
		from := len(h.Changes)
		h.until(L1Bound(5), "5 following 4 after restart", func() bool {
			st := h.Node(5).Status()
			return st.Role == election.RoleFollower && st.Leader == 4 && st.LeaderTerm == term
		})
		h.never(200, "leadership moved away from 4 without preempt", func() bool {
			l, t, ok := h.Agreed()
			return !ok || l != 4 || t != term
		})
		for _, c := range h.Changes[from:] {
			if c.Node != 5 || c.Role != election.RoleFollower || c.Leader != 4 || c.Term != term {
				h.fatalf("unexpected leadership change after restarting 5: %+v (all since restart: %+v)", c, h.Changes[from:])
			}
		}
	}},
	{name: "preempt", opts: Options{N: 5, Preempt: true}, run: func(h *harness) {
		h.agreeOn(L1Bound(5), 5, "cold start")
		h.Crash(5)
		term := h.agreeOn(L1Bound(5), 4, "after crashing 5")
		if err := h.Restart(5); err != nil {
			h.fatalf("Restart(5): %v", err)
		}
		after := h.agreeOn(L1Bound(5), 5, "restarted 5 preempting 4")
		if after <= term {
			h.fatalf("5 leads term %v, not above 4's %v", after, term)
		}
		h.never(200, "leadership moved away from 5", func() bool {
			l, t, ok := h.Agreed()
			return !ok || l != 5 || t != after
		})
	}},
	{name: "resign", opts: Options{N: 5}, run: func(h *harness) {
		before := h.agreeOn(L1Bound(5), 5, "cold start")
		h.run(20) // let the announcement settle (see TestScenarioBugs for resigning at once)
		if err := h.do(3, election.StateMachine.Resign); !errors.Is(err, election.ErrNotLeader) {
			h.fatalf("Resign on follower 3: %v, want ErrNotLeader", err)
		}
		if err := h.do(5, election.StateMachine.Resign); err != nil {
			h.fatalf("Resign on leader 5: %v", err)
		}
		if h.Node(5).Status().Role == election.RoleLeader {
			h.fatalf("5 still leads right after Resign")
		}
		start := h.Now()
		term := h.agreeOn(L1Bound(5), 4, "after 5 resigned")
		if term <= before {
			h.fatalf("term after resign %v, not above %v", term, before)
		}
		if st := h.Node(5).Status(); st.Role != election.RoleFollower || st.Leader != 4 {
			h.fatalf("5 is %v of %d, want follower of 4", st.Role, st.Leader)
		}
		h.t.Logf("4 leads term %v, %d ticks after 5 resigned (%s)", term, h.Now()-start, h.counts())
		h.never(100, "leadership moved away from 4 after resign", func() bool {
			l, t, ok := h.Agreed()
			return !ok || l != 4 || t != term
		})
	}},
	{name: "transfer", opts: Options{N: 5}, run: func(h *harness) {
		before := h.agreeOn(L1Bound(5), 5, "cold start")
		h.run(20)
		if err := h.do(5, func(c election.StateMachine) error { return c.Transfer(99) }); !errors.Is(err, election.ErrUnknownNode) {
			h.fatalf("Transfer(99): %v, want ErrUnknownNode", err)
		}
		if err := h.do(3, func(c election.StateMachine) error { return c.Transfer(2) }); !errors.Is(err, election.ErrNotLeader) {
			h.fatalf("Transfer on follower 3: %v, want ErrNotLeader", err)
		}
		if l, term, ok := h.Agreed(); !ok || l != 5 || term != before {
			h.fatalf("failed transfers changed the leadership")
		}
		h.ResetCounts()
		if err := h.do(5, func(c election.StateMachine) error { return c.Transfer(2) }); err != nil {
			h.fatalf("Transfer(2): %v", err)
		}
		start := h.Now()
		term := h.agreeOn(3, 2, "after transfer to 2")
		if !term.OwnedBy(2) || term <= before {
			h.fatalf("term %v, want owned by 2 and above %v", term, before)
		}
		if got := h.Counts[election.MsgTimeoutNow]; got != 1 {
			h.fatalf("%d TimeoutNow, want 1 (%s)", got, h.counts())
		}
		if got := h.Counts[election.MsgCoordinator]; got != h.N()-1 {
			h.fatalf("%d Coordinator, want %d (%s)", got, h.N()-1, h.counts())
		}
		if got := h.Counts[election.MsgElection]; got != 0 {
			h.fatalf("%d Election messages during a transfer (%s)", got, h.counts())
		}
		h.t.Logf("2 leads term %v %d ticks after Transfer: %s", term, h.Now()-start, h.counts())
		h.never(100, "leadership moved away from 2 after transfer", func() bool {
			l, t, ok := h.Agreed()
			return !ok || l != 2 || t != term
		})
	}},
	{name: "partition-quorum", opts: Options{N: 5, Quorum: true}, run: func(h *harness) {
		h.agreeOn(L1Bound(5), 5, "cold start")
		minority, majority := []election.NodeID{4, 5}, []election.NodeID{1, 2, 3}
		h.Partition(minority, majority)
		start := h.Now()
		var majTerm election.Term
		h.until(L1Bound(5), "minority leaderless and majority on 3", func() bool {
			l, t, ok := h.groupAgreed(majority...)
			majTerm = t
			return ok && l == 3 && h.leaderless(minority...)
		})
		h.t.Logf("majority on 3 term %v and minority leaderless %d ticks after the partition", majTerm, h.Now()-start)
		h.never(200, "minority has a leader or majority lost 3", func() bool {
			l, t, ok := h.groupAgreed(majority...)
			return !h.leaderless(minority...) || !ok || l != 3 || t != majTerm
		})
		h.Heal()
		l, term := h.agree(L1Bound(5), "after heal")
		h.t.Logf("after heal all agree on %d term %v", l, term)
	}},
	{name: "partition-no-quorum", opts: Options{N: 5}, run: func(h *harness) {
		h.agreeOn(L1Bound(5), 5, "cold start")
		minority, majority := []election.NodeID{4, 5}, []election.NodeID{1, 2, 3}
		h.Partition(minority, majority)
		var minTerm, majTerm election.Term
		h.until(L1Bound(5), "5 leading {4,5} and 3 leading {1,2,3}", func() bool {
			l1, t1, ok1 := h.groupAgreed(minority...)
			l2, t2, ok2 := h.groupAgreed(majority...)
			minTerm, majTerm = t1, t2
			return ok1 && ok2 && l1 == 5 && l2 == 3
		})
		if minTerm == majTerm {
			h.fatalf("both sides lead in term %v", minTerm)
		}
		h.never(100, "a side lost its leader while partitioned", func() bool {
			l1, t1, ok1 := h.groupAgreed(minority...)
			l2, t2, ok2 := h.groupAgreed(majority...)
			return !ok1 || !ok2 || l1 != 5 || l2 != 3 || t1 != minTerm || t2 != majTerm
		})
		want := election.NodeID(3)
		if minTerm > majTerm {
			want = 5
		}
		h.t.Logf("partitioned: 5 leads term %v, 3 leads term %v; expecting %d after heal", minTerm, majTerm, want)
		h.Heal()
		term := h.agreeOn(L1Bound(5), want, "after heal")
		if term < max(minTerm, majTerm) {
			h.fatalf("agreed term %v below the higher partition term %v", term, max(minTerm, majTerm))
		}
	}},
	{name: "restart-keeps-term", opts: Options{N: 5}, run: func(h *harness) {
		_, term := h.agree(L1Bound(5), "cold start")
		noted := h.Node(2).Status().Term
		if noted < term {
			h.fatalf("follower 2's term %v below the leader term %v", noted, term)
		}
		h.Crash(2)
		h.run(10)
		if err := h.Restart(2); err != nil {
			h.fatalf("Restart(2): %v", err)
		}
		if got := h.Node(2).Status().Term; got < noted {
			h.fatalf("2 restarted with term %v, below %v", got, noted)
		}
		l, now := h.agree(L1Bound(5), "2 rejoining")
		if l != 5 || now != term {
			h.fatalf("after 2 restarted: leader %d term %v, want 5 %v", l, now, term)
		}
	}},
	{name: "restart-all", opts: Options{N: 3}, run: func(h *harness) {
		l, term := h.agree(L1Bound(3), "cold start")
		before := map[election.NodeID]election.Term{}
		for _, id := range ids(3) {
			before[id] = h.Node(id).Status().Term
			h.Crash(id)
		}
		h.run(5)
		for _, id := range []election.NodeID{l, 1, 2, 3} { // the old leader first
			if err := h.Restart(id); err != nil {
				h.fatalf("Restart(%d): %v", id, err)
			}
			if got := h.Node(id).Status().Term; got < before[id] {
				h.fatalf("%d restarted with term %v, below %v", id, got, before[id])
			}
		}
		l2, term2 := h.agree(L1Bound(3), "after restarting everyone")
		if term2 <= term {
			h.fatalf("leader %d term %v after full restart, not above %v", l2, term2, term)
		}
		for _, id := range ids(3) {
			if got := h.Node(id).Status().Term; got < before[id] {
				h.fatalf("%d's term %v below its pre-crash %v", id, got, before[id])
			}
		}
	}},
	{name: "stable-after-follower-crash", opts: Options{N: 5}, run: func(h *harness) {
		l, term := h.agree(L1Bound(5), "cold start")
		h.Crash(1)
		from := len(h.Changes)
		for range 3 {
			h.never(100, "leader or term changed after a follower crashed", func() bool {
				l2, t2, ok := h.Agreed()
				return !ok || l2 != l || t2 != term
			})
		}
		for _, c := range h.Changes[from:] {
			h.fatalf("leadership change after follower 1 crashed: %+v", c)
		}
	}},
	{name: "1000-nodes", opts: Options{N: 1000}, run: func(h *harness) {
		if raceEnabled() && testing.Short() {
			h.t.Skip("1000-node election skipped under -race -short (about 10s under the race detector)")
		}
		bound := L1Bound(1000)
		term := h.agreeOn(bound, 1000, "1000-node cold start")
		h.t.Logf("%s: 1000 nodes agree on 1000 term %v after %d ticks (bound %d), %d messages (%s)",
			h.algo, term, h.Now(), bound, h.Total(), h.counts())
	}},
}

func TestScenarios(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			for _, algo := range allAlgorithms {
				t.Run(algo, func(t *testing.T) {
					seeds := *scenarioSeeds
					if sc.opts.N > 50 {
						seeds = 1
					}
					for seed := uint64(1); seed <= uint64(seeds); seed++ {
						opts := sc.opts
						opts.Algorithm, opts.Seed = algo, seed
						sc.run(newHarness(t, opts))
					}
				})
			}
		})
	}
}

func TestCheckerSelfTest(t *testing.T) {
	for _, algo := range allAlgorithms {
		t.Run(algo, func(t *testing.T) {
			s, err := New(Options{N: 3, Algorithm: algo, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			term := election.NextTerm(0, 1)
			s.Check.Claim(1, 1, term)
			if err := s.Check.Err(); err != nil {
				t.Fatalf("one claim is not a violation: %v; %s", err, s.Describe())
			}
			s.Check.Claim(2, 2, term)
			if err := s.Check.Err(); err == nil || !strings.Contains(err.Error(), "S1") {
				t.Fatalf("two leaders for term %v: Err() = %v, want an S1 violation; %s", term, err, s.Describe())
			}

			s, err = New(Options{N: 3, Algorithm: algo, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			s.Check.Term(1, 10)
			s.Check.Term(1, 9)
			if err := s.Check.Err(); err == nil || !strings.Contains(err.Error(), "S2") {
				t.Fatalf("term 10 then 9: Err() = %v, want an S2 violation; %s", err, s.Describe())
			}
			if err := s.Step(); err == nil {
				t.Fatalf("Step after a violation returned nil; %s", s.Describe())
			}
		})
	}
}

// staleSelfScenarios are regressions for a bug the scenario tests found: a
// Coordinator naming this node at a term it already led and gave up (Resign,
// Transfer, an expired quorum lease) used to make it lead that term again,
// and cleared the resign exclusion. Core now takes such an announcement only
// for a newer term, and never while excluded.
var staleSelfScenarios = []struct {
	scenario
	bug string
}{
	{bug: "a resigned leader takes its old term back from a late Coordinator naming it, and keeps leading",
		scenario: scenario{name: "resign-at-once-seed-2", opts: Options{N: 5}, run: func(h *harness) {
			// Natural reproduction (ring, seed 2): resign on the very tick the
			// cluster agrees. Followers 2 and 3 saw 5 lag behind its own term
			// 3.5 and, at t=15, sent it the announcement directly
			// (stepHeartbeatResp); 5 resigns at t=15, gets those Coordinators
			// at t=16 and leads 3.5 again; as incumbent it then marks the ring
			// Election 6.1 and wins 7.5. 4 never leads. The successor is a node
			// other than 5 at a higher term: in plain mode a resign goes to the
			// highest member the leader heard from within a leader timeout
			// (resignTarget), and on the tick of agreement 5 had not heard
			// from 4 yet, so it hands over to 3. That transfer settles before
			// a late announcement naming 5 reaches it, so this run no longer
			// reproduces the bug by itself; resign-stale-self-coordinator
			// below delivers one on purpose.
			before := h.agreeOn(L1Bound(5), 5, "cold start")
			if err := h.do(5, election.StateMachine.Resign); err != nil {
				h.fatalf("Resign on leader 5: %v", err)
			}
			l, term := h.agree(L1Bound(5), "after 5 resigned at once")
			if l == 5 {
				h.fatalf("resigned 5 leads again at %v", term)
			}
			if term <= before {
				h.fatalf("term %v not above %v", term, before)
			}
		}}},
	{bug: "a resigned leader takes its old term back from a late Coordinator naming it, and keeps leading",
		scenario: scenario{name: "resign-stale-self-coordinator", opts: Options{N: 5}, run: func(h *harness) {
			old := h.agreeOn(L1Bound(5), 5, "cold start")
			h.run(20)
			if err := h.do(5, election.StateMachine.Resign); err != nil {
				h.fatalf("Resign on leader 5: %v", err)
			}
			// A late duplicate of the announcement of 5's old term.
			stale := election.Message{Type: election.MsgCoordinator, From: 2, To: 5, Term: old, Leader: 5, Confirmed: true}
			if err := h.do(5, func(c election.StateMachine) error { return c.Step(stale) }); err != nil {
				h.fatalf("Step(stale Coordinator): %v", err)
			}
			if h.Node(5).Status().Role == election.RoleLeader {
				h.fatalf("resigned 5 leads its old term %v again after a stale Coordinator", old)
			}
			h.agreeOn(L1Bound(5), 4, "after 5 resigned and saw a stale Coordinator")
		}}},
	{bug: "a leader that handed over leads its old term again on a late Coordinator naming it (until it hears of the new term)",
		scenario: scenario{name: "transfer-stale-self-coordinator", opts: Options{N: 5}, run: func(h *harness) {
			old := h.agreeOn(L1Bound(5), 5, "cold start")
			h.run(20)
			if err := h.do(5, func(c election.StateMachine) error { return c.Transfer(2) }); err != nil {
				h.fatalf("Transfer(2): %v", err)
			}
			stale := election.Message{Type: election.MsgCoordinator, From: 3, To: 5, Term: old, Leader: 5, Confirmed: true}
			if err := h.do(5, func(c election.StateMachine) error { return c.Step(stale) }); err != nil {
				h.fatalf("Step(stale Coordinator): %v", err)
			}
			if h.Node(5).Status().Role == election.RoleLeader {
				h.fatalf("5 leads its old term %v again after handing over to 2", old)
			}
			h.agreeOn(L1Bound(5), 2, "after transfer and a stale Coordinator")
		}}},
	{bug: "in quorum mode a minority leader whose lease ran out leads again, with a fresh lease, on a late Coordinator naming it",
		scenario: scenario{name: "quorum-minority-stale-self-coordinator", opts: Options{N: 5, Quorum: true}, run: func(h *harness) {
			old := h.agreeOn(L1Bound(5), 5, "cold start")
			minority, majority := []election.NodeID{4, 5}, []election.NodeID{1, 2, 3}
			h.Partition(minority, majority)
			h.until(L1Bound(5), "minority leaderless and majority on 3", func() bool {
				l, _, ok := h.groupAgreed(majority...)
				return ok && l == 3 && h.leaderless(minority...)
			})
			stale := election.Message{Type: election.MsgCoordinator, From: 4, To: 5, Term: old, Leader: 5, Confirmed: true}
			if err := h.do(5, func(c election.StateMachine) error { return c.Step(stale) }); err != nil {
				h.fatalf("Step(stale Coordinator): %v", err)
			}
			if h.Node(5).Status().Role == election.RoleLeader {
				h.fatalf("minority node 5 leads %v again without a majority, while 3 leads the majority", old)
			}
		}}},
}

func TestStaleSelfAnnouncement(t *testing.T) {
	for _, bs := range staleSelfScenarios {
		t.Run(bs.name, func(t *testing.T) {
			for _, algo := range allAlgorithms {
				t.Run(algo, func(t *testing.T) {
					opts := bs.opts
					opts.Algorithm, opts.Seed = algo, 2
					bs.run(newHarness(t, opts))
				})
			}
		})
	}
}
