package main

// Gossip convergence after a partition, for electbench scale --partition.
// Without network namespaces a process cannot be cut off from loopback, so
// the partition is a pause: the lower half of the nodes (ids 1..n/2; the
// leader, the highest id, stays up) get SIGSTOP, stay silent until the
// upper half's gossip has declared every one of them dead (or the hold ends),
// then get SIGCONT. From then on every node's Members is polled until each
// lists all n members alive: the time that takes is the convergence.

import (
	"context"
	"fmt"
	"syscall"
	"time"

	pb "github.com/electord/electord/proto/electord/v1"
)

// aliveCounts asks every running node for its members and returns, per
// node, how many of ids it believes alive (-1: no answer).
func (c *cluster) aliveCounts(ids map[uint64]bool) map[uint64]int {
	out := make(map[uint64]int, len(c.procs))
	for _, p := range c.procs {
		out[p.id] = c.aliveOne(p, ids)
	}
	return out
}

// pauseHeal pauses the lower half for at most hold, resumes it and waits
// up to timeout for every node to see every node alive. It returns the
// cell of the scale table.
func (c *cluster) pauseHeal(hold, timeout time.Duration) string {
	n := len(c.procs)
	lower := c.procs[:n/2]
	lowerIDs, all := map[uint64]bool{}, map[uint64]bool{}
	for _, p := range c.procs {
		all[p.id] = true
	}
	for _, p := range lower {
		lowerIDs[p.id] = true
		p.cmd.Process.Signal(syscall.SIGSTOP)
	}
	t0 := time.Now()
	dead := "not all within " + hold.String()
	for time.Since(t0) < hold {
		time.Sleep(500 * time.Millisecond)
		done := true
		for _, p := range c.procs[n/2:] {
			if k := c.aliveOne(p, lowerIDs); k != 0 {
				done = false
				break
			}
		}
		if done {
			dead = fmt.Sprintf("%.1f s", time.Since(t0).Seconds())
			break
		}
	}
	for _, p := range lower {
		p.cmd.Process.Signal(syscall.SIGCONT)
	}
	t1 := time.Now()
	for time.Since(t1) < timeout {
		counts := c.aliveCounts(all)
		ok := true
		for _, k := range counts {
			if k != n {
				ok = false
				break
			}
		}
		if ok {
			return fmt.Sprintf("half paused, declared dead after %s; all %d alive everywhere %.1f s after resuming", dead, n, time.Since(t1).Seconds())
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Sprintf("half paused, declared dead after %s; not converged within %v of resuming", dead, timeout)
}

// aliveOne is aliveCounts for one node (-1: no answer).
func (c *cluster) aliveOne(p *proc, ids map[uint64]bool) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := p.client.Members(ctx, &pb.MembersRequest{})
	if err != nil {
		return -1
	}
	k := 0
	for _, m := range r.Members {
		if m.Alive && ids[m.Id] {
			k++
		}
	}
	return k
}

// pauseLeader measures failover from a silent leader: SIGSTOP of the
// leader (its sockets stay open, so only the heartbeat timeout can find
// it) until every other node agrees on a new leader with a higher term;
// then SIGCONT, and all agree again. It returns the samples and how many
// found no new leader within 10 s.
func (c *cluster) pauseLeader(pauses int) (samples, int) {
	var out samples
	failed := 0
	for i := range pauses {
		old, _, err := c.waitAgreed(60*time.Second, anyLeader)
		if err != nil {
			return out, failed + pauses - i
		}
		p := c.proc(old.Id)
		p.mu.Lock()
		p.running = false // out of the agreement while it is stopped
		p.mu.Unlock()
		p.cmd.Process.Signal(syscall.SIGSTOP)
		t0 := time.Now()
		if d, ok := c.timeNewLeader(old, t0, fmt.Sprintf("pause %d: leader %d stopped", i+1, old.Id)); ok {
			out = append(out, d)
		} else {
			failed++
		}
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.mu.Lock()
		p.running = true
		p.mu.Unlock()
	}
	return out, failed
}
