package sim

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/electord/electord/election"
)

var (
	namedCount     = flag.Int("named.count", 100, "random named-election schedules per algorithm")
	namedSeed      = flag.Uint64("named.seed", 1, "first seed; schedule i uses seed named.seed+i")
	namedElections = flag.Int("named.elections", 0, "elections per schedule (0: 3 to 8, drawn per seed)")
	namedTrace     = flag.Bool("named.trace", false, "trace every message and leadership change (use with -named.count=1)")
	namedAsBuilt   = flag.Bool("named.asbuilt", false, "run without the Mends (the node before its resend: expect lost candidacies to split elections)")
)

// namedSchedule is one random named-election schedule's outcome.
type namedSchedule struct {
	n, elections int
	preempt      bool
	redial       bool // a crash ends the apps' streams (Named.Redial)
	faults       int
	stands       int
	withdrawals  int
	healedAfter  int // ticks from the heal to every election's agreement
	// changeAfter: the most ticks any single change on the healed
	// network took to agreement.
	changeAfter int
}

func (sc namedSchedule) String() string {
	return fmt.Sprintf("n=%d elections=%d preempt=%v redial=%v faults=%d stands=%d withdrawals=%d",
		sc.n, sc.elections, sc.preempt, sc.redial, sc.faults, sc.stands, sc.withdrawals)
}

// NamedBound is the number of ticks within which every named election of
// a healed cluster of n nodes must agree on a live candidate: L1Bound, plus
// what membership takes to see every node again (a rejoin round and the
// gossip after it), after which the candidacies are exchanged.
func NamedBound(n int) int { return L1Bound(n) + 2*10 + 2*2 }

// runNamedSchedule runs one seeded schedule: apps stand and withdraw at
// random through random nodes, in random elections, while the network
// fails as in runSchedule; then everything heals and every election must
// agree on a live candidate within NamedBound, and stay put; then single
// changes on the healed network, each followed by agreement within the
// bound.
func runNamedSchedule(algo string, seed uint64, elections int, mends Mends, trace func(string, ...any)) (namedSchedule, error) {
	r := rand.New(rand.NewPCG(seed, 0x4a3ed))
	sc := namedSchedule{n: 3 + r.IntN(3), elections: elections, preempt: r.IntN(4) == 0, redial: r.IntN(2) == 0}
	if sc.elections == 0 {
		sc.elections = 3 + r.IntN(6)
	}
	ns, err := NewNamed(Options{N: sc.n, Algorithm: algo, Preempt: sc.preempt, Seed: seed})
	if err != nil {
		return sc, err
	}
	ns.Trace = trace
	ns.Mends = mends
	ns.Redial = sc.redial
	names := make([]string, sc.elections)
	for i := range names {
		names[i] = fmt.Sprintf("e%d", i)
	}
	faults := &faultPicker{s: ns.Sim, r: r, restartAt: map[election.NodeID]uint64{}}
	churn := func() error {
		id, ok := faults.pick(faults.ids(ns.Up))
		if !ok {
			return nil
		}
		name := names[r.IntN(len(names))]
		if q := ns.Queue(id, name); len(q) > 0 && r.IntN(2) == 0 {
			sc.withdrawals++
			return ns.Withdraw(id, q[r.IntN(len(q))].ID)
		}
		sc.stands++
		_, err := ns.Stand(id, name, fmt.Sprintf("app-%d", sc.stands), int64(r.IntN(3)))
		return err
	}
	for range 2 * sc.elections {
		if err := churn(); err != nil {
			return sc, err
		}
	}
	faultTicks := 150 + r.IntN(200)
	for range faultTicks {
		if err := faults.tick(); err != nil {
			return sc, err
		}
		if r.IntN(4) == 0 {
			if err := churn(); err != nil {
				return sc, err
			}
		}
		if err := ns.Step(); err != nil {
			return sc, err
		}
	}
	sc.faults = faults.count
	if err := ns.Recover(); err != nil {
		return sc, err
	}
	bound := NamedBound(sc.n)
	disagree := func() string {
		var b []string
		for _, name := range ns.Elections() {
			if _, _, ok := ns.AgreedNamed(name); !ok {
				b = append(b, ns.DescribeNamed(name))
			}
		}
		return strings.Join(b, "\n")
	}
	start := ns.Now()
	if ok, err := ns.RunUntil(bound, ns.AllAgreed); err != nil || !ok {
		return sc, fmt.Errorf("L1 violated: not every election agreed on a live candidate %d ticks after healing (err %v):\n%s", bound, err, disagree())
	}
	sc.healedAfter = int(ns.Now() - start)
	// Suspicions formed before the heal may still fire (see runSchedule).
	if err := ns.Run(max(0, 2*(5+5)-sc.healedAfter)); err != nil {
		return sc, err
	}
	if ok, err := ns.RunUntil(bound, ns.AllAgreed); err != nil || !ok {
		return sc, fmt.Errorf("L1 violated after residual suspicions (err %v):\n%s", err, disagree())
	}
	leaders := func() []string {
		var out []string
		for _, name := range ns.Elections() {
			l, t, _ := ns.AgreedNamed(name)
			out = append(out, fmt.Sprintf("%s:%d@%v", name, l, t))
		}
		return out
	}
	before := leaders()
	if err := ns.Run(2 * bound); err != nil {
		return sc, err
	}
	if after := leaders(); !slices.Equal(before, after) || !ns.AllAgreed() {
		return sc, fmt.Errorf("stability violated: leaders %v became %v on a healthy network with no candidacy change:\n%s", before, after, disagree())
	}
	// One change at a time on the healed network.
	for range 8 {
		if err := churn(); err != nil {
			return sc, err
		}
		start := ns.Now()
		if ok, err := ns.RunUntil(bound, ns.AllAgreed); err != nil || !ok {
			return sc, fmt.Errorf("L1 violated: no agreement %d ticks after a candidacy change on a healthy network (err %v):\n%s", bound, err, disagree())
		}
		sc.changeAfter = max(sc.changeAfter, int(ns.Now()-start))
	}
	return sc, nil
}

// propertyMends are the Mends the property test runs with: the node's
// resend (node/named_resend.go). Without it a Candidacy lost to a fault is
// never sent again, so no bound holds after a heal (TestNamedLostCandidacy
// shows one such run).
var propertyMends = Mends{ResendEvery: 20, WithdrawnRounds: 3}

// TestPropertyNamedElections: many seeds of random candidacy churn in
// several elections under random faults; every step checks S1/S2/S3 and
// W1/W2/W3 per election (see Named), and the end checks agreement on a
// live candidate (L1) and stability.
func TestPropertyNamedElections(t *testing.T) {
	for _, algo := range []string{"ring", "bully"} {
		t.Run(algo, func(t *testing.T) {
			var heal []int
			var worstChange, withdrawals, machines int
			for i := range *namedCount {
				seed := *namedSeed + uint64(i)
				var trace func(string, ...any)
				if *namedTrace {
					trace = t.Logf
				}
				mends := propertyMends
				if *namedAsBuilt {
					mends = Mends{}
				}
				sc, err := runNamedSchedule(algo, seed, *namedElections, mends, trace)
				if err != nil {
					t.Fatalf("%s seed %d (%v): %v\nreproduce: go test ./election/sim -run 'TestPropertyNamedElections/%s' -named.seed=%d -named.count=1 -named.elections=%d -named.asbuilt=%v -named.trace",
						algo, seed, sc, err, algo, seed, *namedElections, *namedAsBuilt)
				}
				heal = append(heal, sc.healedAfter)
				worstChange = max(worstChange, sc.changeAfter)
				withdrawals += sc.withdrawals
				machines += sc.n * sc.elections
			}
			slices.Sort(heal)
			t.Logf("%s: %d schedules, seeds %d..%d, 0 violations of S1/S2/S3/W1/W2/W3/L1/stability; %d withdrawals; ticks from heal to agreement p50=%d p99=%d max=%d; worst single change %d ticks (bound %d at n=5)",
				algo, len(heal), *namedSeed, *namedSeed+uint64(len(heal))-1, withdrawals, heal[len(heal)/2], heal[len(heal)*99/100], heal[len(heal)-1], worstChange, NamedBound(5))
		})
	}
}
