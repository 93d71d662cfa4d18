package history

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// A compact recorder keeps far fewer answers than a full one and the rules
// judge both the same: the same violations (a withdrawn-leads one may be
// dated later), heals and heal times, over
// random histories of three nodes polled every 20 ms whose views change
// now and then (leaders, terms, answers lost), with faults, heals, calms
// and app changes among them, each recorded as the chaos schedule records
// it (a fault's calm window begins at a record of its own). The episodes of two claims (plain mode, not
// violations) are left out: overlapping runs are counted by their ends.
func TestCompactRecorderJudgesAsAFullOne(t *testing.T) {
	kept, all := 0, 0
	for seed := range uint64(300) {
		full, compact := NewRecorder(), NewCompactRecorder()
		both := func(f func(r *Recorder)) { f(full); f(compact) }
		rng := rand.New(rand.NewPCG(seed, 7))
		type view struct{ leader, term uint64 }
		views := []view{{}, {1, term(1, 1)}, {1, term(1, 1)}, {1, term(1, 1)}}
		calmFrom := -1
		both(func(r *Recorder) { r.Topology(topo(0, 3)) })
		both(func(r *Recorder) { r.App(App{At: at(0), Node: 1, Standing: true}) })
		// Answers reach the recorders after their round trip, some of them
		// after a record made meanwhile (the poller adds a round's answers
		// to a thousand recorders one by one), each node's in the order they
		// were sent (one poller per node, a round after the other).
		type late struct {
			o  Obs
			at int
		}
		var queued []late
		addAt := make([]int, 4) // per node: when its last answer was added
		addDue := func(ms int) {
			rest := queued[:0]
			for _, l := range queued {
				if l.at <= ms {
					both(func(r *Recorder) { r.Add(l.o) })
				} else {
					rest = append(rest, l)
				}
			}
			queued = rest
		}
		for ms := 20; ms < 6000; ms += 20 {
			addDue(ms)
			switch p := rng.IntN(100); {
			case p < 3: // a node changes its view
				n := 1 + rng.IntN(3)
				l := uint64(rng.IntN(4))
				views[n] = view{l, views[n].term + uint64(rng.IntN(2))<<16}
			case p < 5: // everyone agrees again
				l := uint64(1 + rng.IntN(3))
				tm := term(uint64(ms), l)
				for n := 1; n <= 3; n++ {
					views[n] = view{l, tm}
				}
			case p < 6:
				both(func(r *Recorder) { r.Topology(topo(ms, 3, [2]int{1, 2})) })
			case p < 8:
				h := Heal{At: at(ms - rng.IntN(100)), What: "x", Kind: fmt.Sprint("k", rng.IntN(3))}
				both(func(r *Recorder) { r.Heal(h) })
			case p < 9 && calmFrom < 0:
				// A fault begins, as the schedule records one: a change of
				// the topology (or an app's) when it begins, the calm when
				// it ends.
				calmFrom = ms
				both(func(r *Recorder) { r.Topology(topo(ms, 3, [2]int{2, 3})) })
			case p < 9:
				c := Calm{From: at(calmFrom), To: at(ms), Leader: views[1].leader, Term: views[1].term, Affected: []int{2}, What: "c"}
				both(func(r *Recorder) { r.Calm(c) })
				calmFrom = -1
			case p < 10:
				a := App{At: at(ms), Node: 1 + rng.IntN(3), Standing: rng.IntN(2) == 0}
				both(func(r *Recorder) { r.App(a) })
			}
			for n := 1; n <= 3; n++ {
				sent, recv := ms+rng.IntN(5), ms+5+rng.IntN(10)
				v := views[n]
				if rng.IntN(50) == 0 {
					o := Obs{Node: n, Kind: Leader, Sent: at(sent), Recv: at(recv), Err: "timeout"}
					addAt[n] = max(addAt[n], recv+rng.IntN(40))
					queued = append(queued, late{o, addAt[n]})
					continue
				}
				lo := follows(n, v.leader, v.term, sent, recv)
				so := self(n, v.term, sent, recv)
				if v.leader == uint64(n) {
					so = claim(n, v.term, sent, recv)
				}
				addAt[n] = max(addAt[n], recv+rng.IntN(40))
				queued = append(queued, late{lo, addAt[n]}, late{so, addAt[n]})
			}
		}
		addDue(1 << 30)
		cfg := Config{Nodes: 3, Named: true, AgreeMax: 500 * time.Millisecond, WithdrawnMax: 300 * time.Millisecond}
		hf, hc := full.History(), compact.History()
		rf, rc := Check(cfg, hf), Check(cfg, hc)
		kept, all = kept+len(hc.Obs), all+len(hf.Obs)
		if !slices.Equal(exact(rf.Violations), exact(rc.Violations)) || len(only(rf, RuleWithdrawnLeads)) != len(only(rc, RuleWithdrawnLeads)) {
			t.Fatalf("seed %d: violations differ:\nonly full    %v\nonly compact %v", seed, minus(rf.Violations, rc.Violations), minus(rc.Violations, rf.Violations))
		}
		if !slices.Equal(rf.HealTimes, rc.HealTimes) || rf.Unhealed != rc.Unhealed || rf.Heals != rc.Heals || rf.LeaderChanges != rc.LeaderChanges {
			t.Fatalf("seed %d: heals differ: full %v (%d unhealed, %d changes), compact %v (%d, %d)", seed,
				rf.HealTimes, rf.Unhealed, rf.LeaderChanges, rc.HealTimes, rc.Unhealed, rc.LeaderChanges)
		}
	}
	t.Logf("kept %d of %d answers (%.0f%%)", kept, all, 100*float64(kept)/float64(all))
	if kept*2 > all {
		t.Errorf("the compact recorder kept %d of %d answers", kept, all)
	}
}

// exact is vs without withdrawn-leads, which a compact recorder finds as
// often but may date later: at the end of the claim's run, not at its first
// answer past the bound.
func exact(vs []Violation) []Violation {
	return slices.DeleteFunc(slices.Clone(vs), func(v Violation) bool { return v.Rule == RuleWithdrawnLeads })
}

// minus is a's violations that b lacks.
func minus(a, b []Violation) []Violation {
	var out []Violation
	for _, v := range a {
		if !slices.Contains(b, v) {
			out = append(out, v)
		}
	}
	return out
}
