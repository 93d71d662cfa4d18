package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	pb "github.com/electord/electord/proto/electord/v1"
)

// Leaderless time per election, as users see it: a WatchLeader stream per
// election on each node watched, summing the time each stream showed no
// leader. The bound for a returning node's rebalance is that no
// election is leaderless for longer than a handover makes it, so the same
// watch measures both: handovers made one at a time at rest (Transfer),
// and the rebalance after a node's return.

// gapWatch is one election's stream on one node.
type gapWatch struct {
	name string
	node uint64

	mu         sync.Mutex
	leaderless time.Duration // the gaps that ended
	ended      []gap         // ... each
	open       time.Time     // the start of the gap under way; zero: none
	first      uint64        // the leader the stream showed first (0: none yet)
	moved      bool          // it showed a leader other than first
	seen       bool          // it showed anything
}

// event takes one LeaderEvent's leader at time at.
func (w *gapWatch) event(li *pb.LeaderInfo, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := li.GetId()
	switch {
	case id == 0 && w.open.IsZero():
		w.open = at
	case id != 0 && !w.open.IsZero():
		w.leaderless += at.Sub(w.open)
		w.ended = append(w.ended, gap{w.open, at.Sub(w.open)})
		w.open = time.Time{}
	}
	if !w.seen {
		w.seen, w.first = true, id
	} else if id != 0 && id != w.first {
		w.moved = true
	}
}

// total is the leaderless time so far, a gap under way counted until at.
func (w *gapWatch) total(at time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.leaderless
	if !w.open.IsZero() {
		d += at.Sub(w.open)
	}
	return d
}

// gap is one stretch a stream showed no leader.
type gap struct {
	from time.Time
	d    time.Duration
}

// timeline is the gaps that ended, by the second (since t0) each began in:
// "second: how many, the longest ms", for the seconds that had any.
func (g *gapWatches) timeline(t0 time.Time) string {
	type bucket struct {
		n       int
		longest time.Duration
	}
	var bs []bucket
	for _, w := range g.ws {
		w.mu.Lock()
		for _, e := range w.ended {
			s := max(int(e.from.Sub(t0)/time.Second), 0)
			for len(bs) <= s {
				bs = append(bs, bucket{})
			}
			bs[s].n++
			bs[s].longest = max(bs[s].longest, e.d)
		}
		w.mu.Unlock()
	}
	var parts []string
	for s, b := range bs {
		if b.n > 0 {
			parts = append(parts, fmt.Sprintf("%ds: %d, %s", s, b.n, ms(b.longest)))
		}
	}
	return strings.Join(parts, "; ")
}

// gapWatches are the streams of some elections on some nodes.
type gapWatches struct {
	ws     []*gapWatch
	nodes  int
	cancel context.CancelFunc
	wg     sync.WaitGroup
	conns  *watchConns
	once   sync.Once
}

// watchGaps opens a WatchLeader stream for each of names on each of procs,
// and returns once every stream has shown its first event.
func watchGaps(c *cluster, procs []*proc, names []string) (*gapWatches, error) {
	ctx, cancel := context.WithCancel(context.Background())
	g := &gapWatches{cancel: cancel, nodes: len(procs), conns: newWatchConns(c)}
	var shown []chan struct{}
	for _, p := range procs {
		for _, name := range names {
			stream, err := g.conns.watch(ctx, p, name)
			if err != nil {
				g.stop()
				return nil, err
			}
			w := &gapWatch{name: name, node: p.id}
			g.ws = append(g.ws, w)
			first := make(chan struct{})
			shown = append(shown, first)
			g.wg.Add(1)
			go func() {
				defer g.wg.Done()
				for once := false; ; once = true {
					ev, err := stream.Recv()
					if err != nil {
						return
					}
					w.event(ev.GetLeader(), time.Now())
					if !once {
						close(first)
					}
				}
			}()
		}
	}
	deadline := time.After(10 * time.Second)
	for _, ch := range shown {
		select {
		case <-ch:
		case <-deadline:
			g.stop()
			return nil, fmt.Errorf("the leaderless-time watches did not all show a first event in 10 s")
		}
	}
	return g, nil
}

// stop ends every stream (once).
func (g *gapWatches) stop() {
	g.once.Do(func() {
		g.cancel()
		g.wg.Wait()
		g.conns.close()
	})
}

// figure is, for each election some node's stream saw move to another
// leader, the longest leaderless time any node's stream showed until at.
func (g *gapWatches) figure(at time.Time) gapFigure {
	var moved samples
	worst := map[string]time.Duration{}
	didMove := map[string]bool{}
	for _, w := range g.ws {
		worst[w.name] = max(worst[w.name], w.total(at))
		w.mu.Lock()
		didMove[w.name] = didMove[w.name] || w.moved
		w.mu.Unlock()
	}
	for name, d := range worst {
		if didMove[name] {
			moved = append(moved, d)
		}
	}
	return gapFigure{moved: moved, watched: len(worst), nodes: g.nodes}
}

// gapFigure is a leaderless-time measurement for the report.
type gapFigure struct {
	moved   samples // per election that moved: the longest leaderless time on any watching node
	watched int
	nodes   int
}

func (g gapFigure) String() string {
	if g.watched == 0 {
		return "not measured"
	}
	gaps := 0
	for _, d := range g.moved {
		if d > 0 {
			gaps++
		}
	}
	return fmt.Sprintf("%d of %d watched moved (streams on %d nodes), %d of them with a gap: p50 %s, p99 %s, max %s ms",
		len(g.moved), g.watched, g.nodes, gaps, ms(g.moved.pct(0.5)), ms(g.moved.pct(0.99)), ms(g.moved.pct(1)))
}

// measureHandovers hands over k of names one at a time, each from its
// leader in leads to the next running node, with every running node
// watching them, and returns their leaderless time.
func measureHandovers(ctx context.Context, c *cluster, names []string, leads map[string]lead, k int) (gapFigure, error) {
	procs := running(c)
	var picked []string
	for _, name := range names {
		if len(picked) == k {
			break
		}
		if leads[name].id != 0 {
			picked = append(picked, name)
		}
	}
	g, err := watchGaps(c, procs, picked)
	if err != nil {
		return gapFigure{}, err
	}
	defer g.stop()
	for _, name := range picked {
		from := c.proc(leads[name].id)
		to := procs[0]
		for i, p := range procs {
			if p.id == from.id {
				to = procs[(i+1)%len(procs)]
			}
		}
		if _, err := from.client.Transfer(ctx, &pb.TransferRequest{Id: to.id, Election: name}); err != nil {
			return gapFigure{}, fmt.Errorf("transfer %s from node %d to %d: %w", name, from.id, to.id, err)
		}
		if err := waitMoved(ctx, procs, name, leads[name], 10*time.Second); err != nil {
			return gapFigure{}, err
		}
	}
	return g.figure(time.Now()), nil
}

// waitMoved waits until every one of procs shows one leadership of name
// newer than was: the handover's receiver's, or one the spread rebalancer
// made meanwhile (moving it on, or back to the node the hash prefers; each
// move's gap is a handover's).
func waitMoved(ctx context.Context, procs []*proc, name string, was lead, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var shown []lead
		for _, p := range procs {
			li, err := p.client.GetLeader(ctx, &pb.GetLeaderRequest{Election: name})
			if err == nil {
				shown = append(shown, lead{li.GetId(), li.GetTerm()})
			}
		}
		if len(shown) == len(procs) && shown[0].id != 0 && shown[0].term > was.term && !slices.ContainsFunc(shown, func(l lead) bool { return l != shown[0] }) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no leadership newer than node %d's at %d shown alike on every node within %v (shown: %v)", name, was.id, was.term, within, shown)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
