package main

// electbench rolling measures graceful stops (issue 10 item 6):
//
//	electbench rolling [--nodes 5] [--terms 20] [--rolls 3] [--algorithms bully,ring]
//	                   [--electord [label=]path,...] [--out file]
//
// For each binary and algorithm it first SIGTERMs the leader --terms times
// (restarting it with the same data dir after it exits, and waiting for the
// cluster to agree again), then restarts the whole cluster --rolls times one
// node at a time as a StatefulSet does: highest ordinal first, SIGTERM, wait
// for the exit, start it again with the same data dir, wait until it is back
// and every node agrees on a leader.
//
// Leaderless time is what the nodes' own watches say: a sampler looks every
// 200 µs at each running node's latest WatchLeader event and counts the time
// during which no running node reports that it leads (the /leader/self 200s
// of the cluster). For a leader's SIGTERM it reports that gap and the time
// from the signal until every survivor agrees on the new leader; for a roll,
// the leaderless time summed over the whole roll; for both, the number of
// samples at which two nodes claimed at once (printed in the ms columns).
// An old leader that keeps claiming while it leaves shows as double claims
// and a long time until survivors agree, not as a leaderless gap.

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	pb "github.com/electord/electord/proto/electord/v1"
)

func rolling(args []string) error {
	fs := flag.NewFlagSet("rolling", flag.ExitOnError)
	cf := commonFlags(fs)
	terms := fs.Int("terms", 20, "SIGTERMs of the leader per algorithm")
	rolls := fs.Int("rolls", 3, "rolling restarts of every node per algorithm")
	out := fs.String("out", "", "also write the report (stdout) to this file")
	fs.Parse(args)
	sb, err := cf.open(*out)
	if err != nil {
		return err
	}
	defer sb.close()
	bins, pr := sb.bins, sb.pr
	pr("# electbench rolling\n\n`electbench %s`\n\n", strings.Join(os.Args[1:], " "))
	pr("- %s, %d electord processes, load average at start %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), *cf.nodes, loadavg())
	for _, b := range bins {
		pr("- %s = `%s` (%s)\n", b.label, b.path, describe(b.path))
	}
	pr("\n| binary | algorithm | measurement | samples | p50 ms | p99 ms | max ms | failed |\n|---|---|---|---:|---:|---:|---:|---:|\n")
	for _, b := range bins {
		for _, algo := range sb.algos {
			logf("%s, %s", b.label, algo)
			c, err := startCluster(b.path, algo, *cf.nodes, strings.Fields(*cf.extra), logf)
			if err != nil {
				return err
			}
			res, err := measureGraceful(c, *terms, *rolls)
			c.stop()
			if err != nil {
				return fmt.Errorf("%s, %s: %w", b.label, algo, err)
			}
			for _, name := range gracefulRows {
				x := res[name]
				pr("| %s | %s | %s | %d | %s | %s | %s | %d |\n", b.label, algo, name, len(x.s), ms(x.s.pct(0.5)), ms(x.s.pct(0.99)), ms(x.s.pct(1)), x.failed)
			}
		}
	}
	return nil
}

var gracefulRows = []string{
	"leader SIGTERM: leaderless gap",
	"leader SIGTERM: until survivors agree",
	"leader SIGTERM: double claims (sampled moments)",
	"rolling restart: leaderless in total",
	"rolling restart: double claims (sampled moments)",
}

// The rows by name.
const (
	rowTermGap = iota
	rowTermAgree
	rowTermDouble
	rowRollGap
	rowRollDouble
)

// claims samples the cluster: how long no running node claimed to lead, and
// at how many samples two or more did.
type claims struct {
	mu       sync.Mutex
	none     time.Duration
	double   int
	stopped  chan struct{}
	finished chan struct{}
}

func sampleClaims(c *cluster) *claims {
	cl := &claims{stopped: make(chan struct{}), finished: make(chan struct{})}
	go func() {
		defer close(cl.finished)
		last := time.Now()
		for {
			select {
			case <-cl.stopped:
				return
			default:
			}
			time.Sleep(200 * time.Microsecond)
			n := 0
			for _, p := range c.procs {
				p.mu.Lock()
				if p.running && p.view != nil && p.view.Self && p.view.Id == p.id {
					n++
				}
				p.mu.Unlock()
			}
			now := time.Now()
			cl.mu.Lock()
			if n == 0 {
				cl.none += now.Sub(last)
			} else if n > 1 {
				cl.double++
			}
			cl.mu.Unlock()
			last = now
		}
	}()
	return cl
}

// read returns the totals so far and resets them.
func (cl *claims) read() (none time.Duration, double int) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	none, double = cl.none, cl.double
	cl.none, cl.double = 0, 0
	return
}

func (cl *claims) stop() { close(cl.stopped); <-cl.finished }

// seedAll gives every node, on its next start, every other node's gossip
// address as a seed, as a StatefulSet's pods all join its headless Service
// (startCluster gives node 1 none, and node 1 restarted alone would lead a
// cluster of its own until gossip merged).
func (c *cluster) seedAll() {
	gossip := map[uint64]string{}
	for _, p := range c.procs {
		for i, a := range p.args {
			if a == "--gossip-addr" && i+1 < len(p.args) {
				gossip[p.id] = p.args[i+1]
			}
		}
	}
	for _, p := range c.procs {
		var seeds []string
		for _, q := range c.procs {
			if q != p {
				seeds = append(seeds, gossip[q.id])
			}
		}
		p.args = append(p.args, "--join", strings.Join(seeds, ","))
	}
}

// terminate SIGTERMs p and waits (up to 10 s, then SIGKILL) for it to exit.
func (c *cluster) terminate(p *proc) {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		logf("node %d did not exit within 10s of SIGTERM: SIGKILL", p.id)
		p.cmd.Process.Kill()
		<-p.exited
	}
	p.watchCancel()
	p.mu.Lock()
	p.running, p.view = false, nil
	p.mu.Unlock()
}

func measureGraceful(c *cluster, terms, rolls int) (map[string]*result, error) {
	res := map[string]*result{}
	for _, r := range gracefulRows {
		res[r] = &result{}
	}
	if _, _, err := c.waitAgreed(30*time.Second, anyLeader); err != nil {
		return nil, fmt.Errorf("first election: %w", err)
	}
	c.seedAll()
	cl := sampleClaims(c)
	defer cl.stop()
	for i := range terms {
		old, _, err := c.waitAgreed(30*time.Second, anyLeader)
		if err != nil {
			return nil, err
		}
		leader := c.proc(old.Id)
		time.Sleep(50 * time.Millisecond) // settle: no gap carried over
		cl.read()
		t0 := time.Now()
		done := make(chan struct{})
		go func() { c.terminate(leader); close(done) }()
		_, at, err := c.waitAgreed(10*time.Second, func(v *pb.LeaderInfo) bool { return v.Id != old.Id && v.Term > old.Term })
		if err != nil {
			for _, r := range []int{rowTermGap, rowTermAgree, rowTermDouble} {
				res[gracefulRows[r]].failed++
			}
			logf("SIGTERM %d: %v", i+1, err)
		} else {
			<-done
			gap, double := cl.read()
			res[gracefulRows[rowTermGap]].s = append(res[gracefulRows[rowTermGap]].s, gap)
			res[gracefulRows[rowTermAgree]].s = append(res[gracefulRows[rowTermAgree]].s, at.Sub(t0))
			res[gracefulRows[rowTermDouble]].s = append(res[gracefulRows[rowTermDouble]].s, time.Duration(double)*time.Millisecond)
			logf("SIGTERM %d: leader %d, leaderless %s ms, survivors agree after %s ms, %d double-claim samples", i+1, old.Id, ms(gap), ms(at.Sub(t0)), double)
		}
		<-done
		if err := c.start(leader); err != nil {
			return nil, err
		}
		if _, _, err := c.waitAgreed(30*time.Second, anyLeader); err != nil {
			return nil, fmt.Errorf("after restarting node %d: %w", leader.id, err)
		}
	}
	for i := range rolls {
		time.Sleep(50 * time.Millisecond)
		cl.read()
		failed := false
		var none time.Duration
		var double int
		var steps []string
		for k := len(c.procs) - 1; k >= 0; k-- {
			p := c.procs[k]
			lead, _, _ := c.agreed(anyLeader)
			c.terminate(p)
			down, _ := cl.read()
			if err := c.start(p); err != nil {
				return nil, err
			}
			_, _, err := c.waitAgreed(30*time.Second, anyLeader)
			up, d := cl.read()
			none, double = none+down+up, double+d
			role := "follower"
			if lead != nil && lead.Id == p.id {
				role = "leader"
			}
			steps = append(steps, fmt.Sprintf("%d(%s) %s+%s", p.id, role, ms(down), ms(up)))
			if err != nil {
				logf("roll %d, node %d: %v", i+1, p.id, err)
				failed = true
				break
			}
		}
		logf("roll %d: leaderless ms by node (while stopping + while restarting): %s", i+1, strings.Join(steps, ", "))
		if failed {
			res[gracefulRows[rowRollGap]].failed++
			continue
		}
		res[gracefulRows[rowRollGap]].s = append(res[gracefulRows[rowRollGap]].s, none)
		res[gracefulRows[rowRollDouble]].s = append(res[gracefulRows[rowRollDouble]].s, time.Duration(double)*time.Millisecond)
		logf("roll %d: leaderless %s ms in total, %d double-claim samples", i+1, ms(none), double)
	}
	return res, nil
}
