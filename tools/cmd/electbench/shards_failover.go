package main

// A failover of `electbench shards`: something ends the leaderships of the
// node leading the most (its SIGKILL, or its app's death), and an observer
// node shows each of those elections' new leader.

import (
	"context"
	"fmt"
	"time"

	pb "github.com/electord/electord/proto/electord/v1"
)

// shardFailover is one such measurement.
type shardFailover struct {
	victim      uint64 // the node whose leaderships ended
	led         int    // elections it led
	watched     samples
	watchMissed int
	polled      samples
	pollMissed  int
	pollRes     time.Duration // the longest time between two polls' answers on the observer
	leaderless  int           // after --settle: elections leaderless, or led by victim, on some node
}

// failoverWithin bounds the wait for every new leader.
const failoverWithin = 10 * time.Second

// measure picks the node leading the most in leads, starts the observer's
// WatchLeader sample (at most watch of its elections) on the next node,
// calls end with its id, and measures until every election it led shows
// another leader at a higher term on the observer, or failoverWithin.
// profiles, if set, names the env variable that asks for the other nodes'
// CPU profiles over the failover (profileNodes).
func (fo *shardFailover) measure(ctx context.Context, c *cluster, names []string, leads map[string]lead, watch int, profiles string, end func(id uint64)) error {
	byNode := perNode(leads)
	for _, p := range c.procs {
		if byNode[p.id] > fo.led {
			fo.victim, fo.led = p.id, byNode[p.id]
		}
	}
	if fo.victim == 0 {
		return fmt.Errorf("no node leads any election")
	}
	observer := c.procs[int(fo.victim)%len(c.procs)]
	var led []string
	for _, name := range names {
		if leads[name].id == fo.victim {
			led = append(led, name)
		}
	}
	sample := led[:min(watch, len(led))]
	old := map[string]*pb.LeaderInfo{}
	for _, name := range sample {
		li, err := observer.client.GetLeader(ctx, &pb.GetLeaderRequest{Election: name})
		if err != nil {
			return err
		}
		old[name] = li
	}
	ws, stopWatch, err := observe(c, observer, sample, old, fo.victim)
	if err != nil {
		return err
	}
	var others []*proc
	for _, p := range running(c) {
		if p.id != fo.victim {
			others = append(others, p)
		}
	}
	profiled := func() {}
	if profiles != "" {
		profiled = profileNodes(profiles, others, 2*time.Second)
	}
	t0 := time.Now()
	end(fo.victim)
	fo.polled, fo.pollMissed, fo.pollRes = pollNewLeaders(ctx, observer, led, leads, t0, failoverWithin)
	// The polls above may end before the watches' goroutines have run:
	// wait for each with the same bound.
	wctx, wcancel := context.WithDeadline(ctx, t0.Add(failoverWithin))
	for _, w := range ws {
		select {
		case <-w.done:
			fo.watched = append(fo.watched, w.at.Sub(t0))
		case <-wctx.Done():
			fo.watchMissed++
		}
	}
	wcancel()
	stopWatch()
	profiled()
	return nil
}

// line is the measurement in one log line.
func (fo *shardFailover) line() string {
	return fmt.Sprintf("watched p50 %s p99 %s ms (%d missed), polled p50 %s p99 %s ms (%d missed, answers at most %v apart)",
		ms(fo.watched.pct(0.5)), ms(fo.watched.pct(0.99)), fo.watchMissed,
		ms(fo.polled.pct(0.5)), ms(fo.polled.pct(0.99)), fo.pollMissed, fo.pollRes.Round(time.Millisecond))
}

// report prints the measurement's rows, each led by what; gone names the
// leader that must no longer lead.
func (fo *shardFailover) report(pr func(string, ...any), what, gone string) {
	pr("| %s: new leader seen, WatchLeader sample (exact) | %d: p50 %s, p99 %s, max %s ms; %d not in %v |\n",
		what, len(fo.watched), ms(fo.watched.pct(0.5)), ms(fo.watched.pct(0.99)), ms(fo.watched.pct(1)), fo.watchMissed, failoverWithin)
	pr("| %s: new leader seen, every election (ListElections polls, answers at most %s ms apart) | %d: p50 %s, p99 %s, max %s ms; %d not in %v |\n",
		what, ms(fo.pollRes), len(fo.polled), ms(fo.polled.pct(0.5)), ms(fo.polled.pct(0.99)), ms(fo.polled.pct(1)), fo.pollMissed, failoverWithin)
	pr("| %s: leaderless (or led by %s) on some node after the settle | %d |\n", what, gone, fo.leaderless)
}
