package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// termLog records every leadership that any candidacy or watch was told
// of, per election, and checks as it goes: one leader per term (S1), and
// terms that never go down as each stream sees them (S3 for a reader that
// fences with them).
type termLog struct {
	mu     sync.Mutex
	t      *testing.T
	owner  map[string]map[election.Term]election.NodeID
	errors []string
	hist   map[string][]string
}

func (l *termLog) record(stream, name string, li LeaderInfo, last *election.Term) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hist == nil {
		l.hist = map[string][]string{}
	}
	l.hist[stream] = append(l.hist[stream], fmt.Sprintf("%d@%v/%s", li.ID, li.Term, li.State))
	if li.ID == 0 {
		return
	}
	if li.Term < *last {
		l.errors = append(l.errors, fmt.Sprintf("%s: %s leader term went down %v -> %v; it saw %v", stream, name, *last, li.Term, l.hist[stream]))
	}
	*last = li.Term
	if l.owner[name] == nil {
		l.owner[name] = map[election.Term]election.NodeID{}
	}
	if o, ok := l.owner[name][li.Term]; ok && o != li.ID {
		l.errors = append(l.errors, fmt.Sprintf("%s: two leaders at %v: %d and %d", name, li.Term, o, li.ID))
	}
	l.owner[name][li.Term] = li.ID
}

// TestNamedElectionsUnderChurn: three nodes, three elections; apps open
// and close candidacies at random, one change at a time. After each change
// every node agrees on one leader per election, a node with a live
// candidacy; an election nobody stands in shows no leader anywhere; and
// across the run no term has two leaders and no stream sees a term go down.
func TestNamedElectionsUnderChurn(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			c := newCluster(t, algo, 3)
			c.agree(10*time.Second, 0)
			ctx := context.Background()
			log := &termLog{t: t, owner: map[string]map[election.Term]election.NodeID{}}
			names := []string{"e0", "e1", "e2"}
			var wg sync.WaitGroup
			for id := election.NodeID(1); id <= 3; id++ {
				for _, name := range names {
					w, err := c.nodes[id].WatchElection(ctx, name)
					if err != nil {
						t.Fatal(err)
					}
					defer w.Close()
					wg.Add(1)
					go func() {
						defer wg.Done()
						var last election.Term
						for li := range w.C() {
							log.record(fmt.Sprintf("watch %s on %d", name, id), name, li, &last)
						}
					}()
				}
			}
			type key struct {
				id   election.NodeID
				name string
			}
			open := map[key][]*Candidacy{}
			rng := rand.New(rand.NewPCG(7, uint64(len(algo))))
			for step := 0; step < 40; step++ {
				k := key{election.NodeID(1 + rng.IntN(3)), names[rng.IntN(len(names))]}
				if cs := open[k]; len(cs) > 0 && rng.IntN(2) == 0 {
					i := rng.IntN(len(cs))
					if err := cs[i].Close(); err != nil {
						t.Fatal(err)
					}
					open[k] = append(cs[:i:i], cs[i+1:]...)
				} else {
					cd, err := c.nodes[k.id].Campaign(ctx, k.name, fmt.Sprintf("app-%d-%s-%d", k.id, k.name, step), 0)
					if err != nil {
						t.Fatal(err)
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						var last election.Term
						for ev := range cd.Events() {
							log.record(fmt.Sprintf("candidacy %d on %d", cd.ID, k.id), k.name, ev.Leader, &last)
						}
					}()
					open[k] = append(open[k], cd)
				}
				// Every election settles: the same leader everywhere, and it
				// is a node where an app stands.
				for _, name := range names {
					standing := map[election.NodeID]bool{}
					for id := election.NodeID(1); id <= 3; id++ {
						standing[id] = len(open[key{id, name}]) > 0
					}
					deadline := time.Now().Add(5 * time.Second)
					for {
						ok, state := settled(c, name, standing)
						if ok {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("step %d: %s did not settle: %s", step, name, state)
						}
						time.Sleep(5 * time.Millisecond)
					}
				}
			}
			for _, cs := range open {
				for _, cd := range cs {
					cd.Close()
				}
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			for _, e := range log.errors {
				t.Error(e)
			}
		})
	}
}

// settled reports whether every node shows the same leader of name at the
// same term, one of the standing nodes (or none, when none stands).
func settled(c *cluster, name string, standing map[election.NodeID]bool) (bool, string) {
	var first LeaderInfo
	state := ""
	any := false
	for _, s := range standing {
		any = any || s
	}
	for id := election.NodeID(1); id <= 3; id++ {
		li, _ := c.nodes[id].ElectionLeader(name)
		state += fmt.Sprintf("%d:%d@%v ", id, li.ID, li.Term)
		switch {
		case id == 1:
			first = li
		case li.ID != first.ID || li.Term != first.Term:
			return false, state
		}
	}
	if !any {
		return first.ID == 0, state
	}
	return first.ID != 0 && standing[first.ID], state
}
