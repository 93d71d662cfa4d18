package chaos_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/tools/chaos"
	"github.com/electord/electord/tools/faultnet"
	"github.com/electord/electord/tools/history"
)

// What plain mode (no --quorum) promises around a heal, as this test
// checks it on five real processes with real cuts:
//
//   - While a fault cuts off only followers (one follower isolated, or a
//     partition whose side with the leader is strictly larger), the nodes
//     of the leader's side keep following that leader, and it keeps
//     claiming. The cut-off side may elect its own leader meanwhile.
//   - After the heal the same leader node leads and every node follows it
//     (its term may be higher than before: it reasserts above the terms the
//     cut-off side used). After a leader was isolated, the leader the other
//     nodes elected and followed keeps leading.
//   - No node's reported term ever goes down.
//   - After any heal, one-way cuts and an isolated leader included, every
//     node agrees on one leader within blipAgreeMax.
const (
	// blipAgreeMax is the goal for heal to agreement (p99); one
	// run must meet it.
	blipAgreeMax = 2 * time.Second
	// blipHoldMin is the shortest a fault holds: "a few seconds", longer
	// than a follower's leader timeout with its jitter, so that a cut-off
	// node campaigns.
	blipHoldMin = 3 * time.Second
	// blipHoldMax bounds the wait for what a fault should cause (the cut-off
	// side electing itself, the majority electing a new leader).
	blipHoldMax = 10 * time.Second
	// blipAgreeWait bounds every wait for an agreed leader.
	blipAgreeWait = 30 * time.Second
)

// TestBlipKeepsTheLeader runs, for each algorithm in plain mode on one
// cluster of five: an isolated follower held until it elected itself; a
// partition [two followers] | [the leader and two followers] held until
// the minority elected itself; a one-way cut from the leader to a
// follower; and an isolated leader. Each is a subtest, judged by the
// history checker (tools/history: follower-fault, term-monotonic,
// heal-agreement with a 2 s limit, one-leader-per-term) over the answers
// given from its start to its end.
func TestBlipKeepsTheLeader(t *testing.T) {
	needFaultnet(t, "blip test")
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) { blips(t, algo) })
	}
}

// blipCluster is one cluster under test, its recorder and poller.
type blipCluster struct {
	c   *faultnet.Cluster
	rec *history.Recorder
	all []int
}

func blips(t *testing.T, algo string) {
	rec := history.NewRecorder()
	dir, args := keepDir(t, algo)
	c, err := faultnet.New(faultnet.Config{Binary: electordBin, Nodes: 5, Algorithm: algo, Tag: "blip", Dir: dir, Args: args, Logf: t.Logf,
		OnChange: func(tp faultnet.Topology) { rec.Topology(history.Topology(tp)) }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer chaos.Poll(c, rec, "")()
	b := &blipCluster{c: c, rec: rec, all: []int{1, 2, 3, 4, 5}}
	for _, s := range []struct {
		name  string
		fault func(t *testing.T, b *blipCluster, before history.Agreement)
	}{
		{"isolated-follower", isolatedFollower},
		{"partition-of-followers", partitionOfFollowers},
		{"one-way-leader-to-follower", oneWayFromLeader},
		{"isolated-leader", isolatedLeader},
	} {
		t.Run(s.name, func(t *testing.T) {
			from := time.Now()
			before, ok := rec.WaitAgreed(b.all, from, blipAgreeWait)
			if !ok {
				t.Fatalf("no agreed leader within %v before the fault", blipAgreeWait)
			}
			t.Logf("before: node %d leads at term %s", before.Leader, termString(before.Term))
			s.fault(t, b, before)
			b.judge(t, from)
		})
	}
}

// followers returns the nodes other than leader, lowest first.
func (b *blipCluster) followers(leader uint64) []int {
	return slices.DeleteFunc(slices.Clone(b.all), func(n int) bool { return uint64(n) == leader })
}

// hold keeps a fault for at least blipHoldMin, and then until cond holds
// (cond as in history.Recorder.WaitFor) or blipHoldMax has passed since
// the cut; it says whether cond held.
func (b *blipCluster) hold(cut time.Time, cond func(latest func(int, history.Kind) (history.Obs, bool)) bool) bool {
	ok := b.rec.WaitFor(time.Until(cut.Add(blipHoldMax)), cond)
	holdMin(cut)
	return ok
}

// holdMin returns blipHoldMin after cut: the fault's length, not a wait
// for an event.
func holdMin(cut time.Time) {
	if rest := time.Until(cut.Add(blipHoldMin)); rest > 0 {
		time.Sleep(rest)
	}
}

// claimsSince says whether one of nodes answered /leader/self 200 in an
// answer sent after since; it returns which.
func claimsSince(latest func(int, history.Kind) (history.Obs, bool), nodes []int, since time.Time) (int, bool) {
	for _, n := range nodes {
		if o, ok := latest(n, history.Self); ok && !o.Sent.Before(since) && o.Claim() {
			return n, true
		}
	}
	return 0, false
}

// heal restores every link and records the heal (and the follower-only
// fault, if calm is set) for the checker; it waits for agreement and lets
// the links settle before the next fault.
func (b *blipCluster) heal(t *testing.T, kind string, calm *history.Calm) {
	t.Helper()
	if err := b.c.Heal(); err != nil {
		t.Fatal(err)
	}
	at := b.c.Topology().At
	b.rec.Heal(history.Heal{At: at, What: kind, Kind: kind})
	if calm != nil {
		calm.To, calm.What = at, kind
		b.rec.Calm(*calm)
	}
	if a, ok := b.rec.WaitAgreed(b.all, at, blipAgreeWait); ok {
		// The heal's wall-clock time, to read the nodes' logs against.
		t.Logf("after the heal (%s): node %d leads at term %s, agreed %.0f ms after the heal", at.UTC().Format("15:04:05.000"),
			a.Leader, termString(a.Term), float64(a.At.Sub(at).Microseconds())/1000)
	} else {
		t.Logf("after the heal: no agreed leader within %v", blipAgreeWait)
	}
	// TCP retransmits what the cut dropped with a doubling timeout: let
	// the old connections recover before the next fault is judged.
	time.Sleep(chaos.LinkSettle)
}

// judge fails t on every violation the checker finds in what was
// observed from from until now.
func (b *blipCluster) judge(t *testing.T, from time.Time) {
	t.Helper()
	h := b.rec.History()
	r := history.Check(history.Config{Nodes: len(b.all), AgreeMax: blipAgreeMax}, h)
	to := time.Now()
	var bad []string
	for _, v := range r.Violations {
		if !v.At.Before(from) && v.At.Before(to) {
			bad = append(bad, r.Format(v))
		}
	}
	if len(bad) == 0 {
		return
	}
	var notes []string
	for _, n := range h.Notes {
		if !n.At.Before(from) {
			notes = append(notes, fmt.Sprintf("%9.3fs %s", n.At.Sub(r.Start).Seconds(), n.Text))
		}
	}
	t.Errorf("%d violations:\n%s\nfault log:\n%s", len(bad), strings.Join(bad, "\n"), strings.Join(notes, "\n"))
	t.Logf("the nodes' leadership changes in this scenario, with their causes:\n%s", leadershipChanges(b.c.Dir(), r.Start, func(at time.Time) bool {
		return !at.Before(from) && at.Before(to)
	}))
}

// isolatedFollower cuts the lowest follower off both ways until it has
// elected itself, then heals: the leader must stay.
func isolatedFollower(t *testing.T, b *blipCluster, before history.Agreement) {
	f := b.followers(before.Leader)[0]
	b.rec.Notef("isolate follower %d (leader %d)", f, before.Leader)
	if err := b.c.Isolate(f); err != nil {
		t.Fatal(err)
	}
	cut := b.c.Topology().At
	elected := b.hold(cut, func(latest func(int, history.Kind) (history.Obs, bool)) bool {
		_, ok := claimsSince(latest, []int{f}, cut)
		return ok
	})
	b.rec.Notef("node %d elected itself while cut off: %v", f, elected)
	t.Logf("node %d cut off for %.1f s; elected itself: %v", f, time.Since(cut).Seconds(), elected)
	b.heal(t, "isolated follower", &history.Calm{From: cut, Leader: before.Leader, Term: before.Term, Affected: []int{f}})
}

// partitionOfFollowers splits [the two lowest followers] | [the leader
// and the others] until the minority has elected one of its own, then
// heals: the leader must stay.
func partitionOfFollowers(t *testing.T, b *blipCluster, before history.Agreement) {
	fs := b.followers(before.Leader)
	minority, majority := fs[:2], append([]int{int(before.Leader)}, fs[2:]...)
	b.rec.Notef("partition %v | %v (leader %d)", minority, majority, before.Leader)
	if err := b.c.Partition(minority, majority); err != nil {
		t.Fatal(err)
	}
	cut := b.c.Topology().At
	elected := b.hold(cut, func(latest func(int, history.Kind) (history.Obs, bool)) bool {
		_, ok := claimsSince(latest, minority, cut)
		return ok
	})
	b.rec.Notef("the minority %v elected one of its own: %v", minority, elected)
	t.Logf("%v cut off for %.1f s; elected one of its own: %v", minority, time.Since(cut).Seconds(), elected)
	b.heal(t, "partition of followers", &history.Calm{From: cut, Leader: before.Leader, Term: before.Term, Affected: minority})
}

// oneWayFromLeader drops the leader's packets to the lowest follower
// until that follower no longer names it, then heals: agreement must
// come within blipAgreeMax.
func oneWayFromLeader(t *testing.T, b *blipCluster, before history.Agreement) {
	f := b.followers(before.Leader)[0]
	b.rec.Notef("one-way cut %d -> %d", before.Leader, f)
	if err := b.c.Cut(int(before.Leader), f); err != nil {
		t.Fatal(err)
	}
	cut := b.c.Topology().At
	lost := b.hold(cut, func(latest func(int, history.Kind) (history.Obs, bool)) bool {
		o, ok := latest(f, history.Leader)
		return ok && !o.Sent.Before(cut) && o.Leads() != before.Leader
	})
	b.rec.Notef("node %d stopped naming node %d: %v", f, before.Leader, lost)
	t.Logf("%d -> %d cut for %.1f s; node %d stopped naming the leader: %v", before.Leader, f, time.Since(cut).Seconds(), f, lost)
	b.heal(t, "one-way cut from the leader", nil)
}

// isolatedLeader cuts the leader off both ways until the others agree on
// a new leader, then heals: that new leader must keep leading, and
// agreement must come within blipAgreeMax.
func isolatedLeader(t *testing.T, b *blipCluster, before history.Agreement) {
	others := b.followers(before.Leader)
	b.rec.Notef("isolate leader %d", before.Leader)
	if err := b.c.Isolate(int(before.Leader)); err != nil {
		t.Fatal(err)
	}
	cut := b.c.Topology().At
	next, ok := b.rec.WaitAgreed(others, cut, blipHoldMax)
	holdMin(cut)
	if !ok {
		b.rec.Notef("the others agreed on no new leader within %v", blipHoldMax)
		t.Logf("the others %v agreed on no new leader within %v", others, blipHoldMax)
		b.heal(t, "isolated leader", nil)
		return
	}
	b.rec.Notef("the others follow node %d at term %s", next.Leader, termString(next.Term))
	t.Logf("leader %d cut off for %.1f s; the others follow node %d at term %s", before.Leader, time.Since(cut).Seconds(), next.Leader, termString(next.Term))
	// From the others' agreement on, the old leader is the cut-off
	// minority: the new leader is the one to keep.
	b.heal(t, "isolated leader", &history.Calm{From: next.At, Leader: next.Leader, Term: next.Term, Affected: []int{int(before.Leader)}})
}

// termString prints a term as electord does: epoch.slot.
func termString(t uint64) string { return fmt.Sprintf("%d.%d", t>>16, t&0xffff) }
