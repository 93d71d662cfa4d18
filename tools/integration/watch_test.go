package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/electord/electord/client"
	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
)

// watchRecorder reads a client.Watch channel and keeps every event.
type watchRecorder struct {
	t   *testing.T
	ch  <-chan client.Event
	evs []client.Event
}

// until reads events until one satisfies pred, failing the test when none
// does within timeout.
func (w *watchRecorder) until(timeout time.Duration, what string, pred func(client.Event) bool) client.Event {
	w.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-w.ch:
			if !ok {
				w.t.Fatalf("watch: the channel closed while waiting for %s; events so far:\n%s", what, describeEvents(w.evs))
			}
			w.evs = append(w.evs, ev)
			if pred(ev) {
				return ev
			}
		case <-deadline:
			w.t.Fatalf("watch: no %s within %v; events so far:\n%s", what, timeout, describeEvents(w.evs))
		}
	}
}

func describeEvents(evs []client.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Err != nil {
			fmt.Fprintf(&b, "  error from %q: %v\n", ev.Endpoint, ev.Err)
			continue
		}
		fmt.Fprintf(&b, "  #%d from %s: leader %d term %v state %s self=%v dropped=%d resumed=%v\n",
			ev.Seq, ev.Endpoint, ev.Leader.ID, ev.Leader.Term, ev.Leader.State, ev.Leader.Self, ev.Dropped, ev.Resumed)
	}
	return b.String()
}

// view is the part of a leadership event the tests compare.
type view struct {
	ID    election.NodeID
	Term  election.Term
	State string
}

func (v view) String() string {
	if v.ID == 0 {
		return fmt.Sprintf("none@%v/%s", v.Term, v.State)
	}
	return fmt.Sprintf("%d@%v/%s", v.ID, v.Term, v.State)
}

func leaderIs(li client.LeaderInfo, want node.LeaderInfo) bool {
	return li.ID == want.ID && li.Term == want.Term
}

// TestWatchEventsInOrder: a client.Watch on a follower sees, through resign
// then transfer, every leadership change its node sees, in order, with
// terms that never decrease; a no-leader gap the node saw is in the stream
// too. The node's own in-process subscription is the reference.
func TestWatchEventsInOrder(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		c := startCluster(t, devcluster.Options{Nodes: 5, Algorithm: alg})
		l0 := waitAgreement(t, c.Nodes, 10*time.Second, "first election")
		// A follower that is neither the transfer target nor a likely
		// successor: node 1.
		fol := nodeByID(t, c, 1)
		if l0.ID == 1 {
			t.Fatalf("node 1 leads; the test wants it to follow")
		}
		truth := fol.Node.Subscribe()
		defer truth.Close()

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := &watchRecorder{t: t, ch: newClient(t, fol.APIAddr).Watch(ctx)}
		first := w.until(5*time.Second, "first event", func(client.Event) bool { return true })
		// The same leader, in the term of the first agreement or a later
		// one: a bully campaign that crossed the first announcement makes
		// the leader announce itself again, in a new term.
		if first.Err != nil || first.Leader.ID != l0.ID || first.Leader.Term < l0.Term || first.Leader.Self || first.Leader.State != client.StateFollower {
			t.Fatalf("first watch event %s, want node %d in term %v or later, seen by a follower", describeEvents([]client.Event{first}), l0.ID, l0.Term)
		}
		l0.Term = first.Leader.Term

		cmd := newClient(t, apiAddrs(c.Nodes)...)
		if _, err := cmd.Resign(ctxTimeout(t, 5*time.Second)); err != nil {
			t.Fatalf("Resign: %v", err)
		}
		var l1 node.LeaderInfo
		eventually(t, 5*time.Second, "a new leader after resign", func() (bool, string) {
			li, ok := agreement(c.Nodes)
			l1 = li
			return ok && li.ID != l0.ID && li.Term > l0.Term, describeViews(c.Nodes)
		})
		w.until(5*time.Second, fmt.Sprintf("event for node %d in term %v", l1.ID, l1.Term), func(ev client.Event) bool {
			return ev.Err == nil && leaderIs(ev.Leader, l1)
		})

		if _, err := cmd.Transfer(ctxTimeout(t, 5*time.Second), 2); err != nil {
			t.Fatalf("Transfer(2): %v", err)
		}
		var l2 node.LeaderInfo
		eventually(t, 5*time.Second, "node 2 leads after transfer", func() (bool, string) {
			li, ok := agreement(c.Nodes)
			l2 = li
			return ok && li.ID == 2 && li.Term > l1.Term, describeViews(c.Nodes)
		})
		w.until(5*time.Second, fmt.Sprintf("event for node 2 in term %v", l2.Term), func(ev client.Event) bool {
			return ev.Err == nil && leaderIs(ev.Leader, l2)
		})
		cancel()

		// The reference: what node 1 itself published, up to node 2's term.
		var want []view
		deadline := time.After(5 * time.Second)
	read:
		for {
			select {
			case li := <-truth.C():
				if li.Term < l0.Term {
					continue // before the watch began
				}
				want = append(want, view{li.ID, li.Term, li.State})
				if li.ID == l2.ID && li.Term == l2.Term {
					break read
				}
			case <-deadline:
				t.Fatalf("node 1's own subscription did not deliver node 2 in term %v; got %v", l2.Term, want)
			}
		}
		if truth.Dropped() != 0 {
			t.Fatalf("the reference subscription dropped %d events", truth.Dropped())
		}

		var got []view
		for _, ev := range w.evs {
			if ev.Err != nil {
				t.Errorf("the watch stream of a live node broke: %v", ev.Err)
				continue
			}
			if ev.Dropped != 0 {
				t.Errorf("event #%d: the server dropped %d events", ev.Seq, ev.Dropped)
			}
			got = append(got, view{ev.Leader.ID, ev.Leader.Term, ev.Leader.State})
		}
		t.Logf("node 1 saw %v", want)
		t.Logf("watch got   %v", got)

		// Terms never decrease.
		for i := 1; i < len(got); i++ {
			if got[i].Term < got[i-1].Term {
				t.Errorf("event %d (%v) has a lower term than event %d (%v)", i, got[i], i-1, got[i-1])
			}
		}
		// Every leadership the node saw appears, in the same order.
		leaders := func(vs []view) []view {
			var out []view
			for _, v := range vs {
				if v.ID != 0 && (len(out) == 0 || out[len(out)-1].ID != v.ID || out[len(out)-1].Term != v.Term) {
					out = append(out, view{v.ID, v.Term, ""})
				}
			}
			return out
		}
		if g, wl := leaders(got), leaders(want); fmt.Sprint(g) != fmt.Sprint(wl) {
			t.Errorf("leaders in the watch: %v; node 1 saw %v", g, wl)
		}
		for _, must := range []node.LeaderInfo{l0, l1, l2} {
			found := false
			for _, v := range got {
				found = found || (v.ID == must.ID && v.Term == must.Term)
			}
			if !found {
				t.Errorf("the watch never reported node %d in term %v", must.ID, must.Term)
			}
		}
		// A gap (no leader) the node saw between two leaders is in the stream.
		gaps := func(vs []view) map[string]bool {
			out := map[string]bool{}
			var last view
			gap := false
			for _, v := range vs {
				switch {
				case v.ID == 0:
					gap = true
				case last.ID != 0 && (v.ID != last.ID || v.Term != last.Term):
					if gap {
						out[fmt.Sprint(last.ID, "@", last.Term, "->", v.ID, "@", v.Term)] = true
					}
					gap = false
				default:
					gap = false
				}
				if v.ID != 0 {
					last = v
				}
			}
			return out
		}
		gotGaps := gaps(got)
		for g := range gaps(want) {
			if !gotGaps[g] {
				t.Errorf("node 1 saw no leader between %s, but the watch shows no gap there", g)
			}
		}
		// With nothing dropped, the stream is exactly what the node published.
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("the watch stream differs from node 1's own events:\n got  %v\n want %v", got, want)
		}
	})
}

// TestClientFailover: a closed first endpoint is skipped; a watch whose
// endpoint's daemon stops carries on from another endpoint and still
// delivers later changes.
func TestClientFailover(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, alg string) {
		c := startCluster(t, devcluster.Options{Nodes: 5, Algorithm: alg})
		l0 := waitAgreement(t, c.Nodes, 10*time.Second, "first election")

		closed := closedAddr(t)
		cl := newClient(t, append([]string{closed}, apiAddrs(c.Nodes)...)...)
		li, err := cl.Leader(ctxTimeout(t, 5*time.Second))
		if err != nil || li.ID != l0.ID || li.Term < l0.Term {
			t.Fatalf("Leader with a closed first endpoint: %+v, %v; want node %d in term %v or later", li, err, l0.ID, l0.Term)
		}

		// Watch through node A (a follower) first, the others after it.
		a := nodeByID(t, c, 1)
		rest := without(c.Nodes, 1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := &watchRecorder{t: t, ch: newClient(t, append([]string{a.APIAddr}, apiAddrs(rest)...)...).Watch(ctx)}
		first := w.until(5*time.Second, "first event", func(client.Event) bool { return true })
		if first.Err != nil || first.Endpoint != a.APIAddr || first.Leader.ID != l0.ID || first.Leader.Term < l0.Term {
			t.Fatalf("first event %s; want node %d in term %v or later from %s", describeEvents([]client.Event{first}), l0.ID, l0.Term, a.APIAddr)
		}

		stopped := make(chan error, 1)
		go func() { stopped <- a.Stop() }()
		resumed := w.until(10*time.Second, "an event from another endpoint after node 1 stopped", func(ev client.Event) bool {
			return ev.Err == nil && ev.Endpoint != a.APIAddr
		})
		select {
		case err := <-stopped:
			if err != nil {
				t.Errorf("Stop of node 1: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Stop of node 1 did not return within 10s")
		}
		if !resumed.Resumed || resumed.Leader.Term < l0.Term || !resumed.Leader.HasLeader() {
			t.Errorf("first event after the break: %s; want a resumed event at term >= %v", describeEvents([]client.Event{resumed}), l0.Term)
		}

		// A change after the failover arrives through the new endpoint.
		l1 := waitAgreement(t, rest, 5*time.Second, "the four remaining nodes agree")
		if _, err := cl.Resign(ctxTimeout(t, 5*time.Second)); err != nil {
			t.Fatalf("Resign: %v", err)
		}
		var l2 node.LeaderInfo
		eventually(t, 5*time.Second, "a new leader after resign", func() (bool, string) {
			li, ok := agreement(rest)
			l2 = li
			return ok && li.ID != l1.ID && li.Term > l1.Term, describeViews(rest)
		})
		ev := w.until(5*time.Second, fmt.Sprintf("event for node %d in term %v", l2.ID, l2.Term), func(ev client.Event) bool {
			return ev.Err == nil && leaderIs(ev.Leader, l2)
		})
		if ev.Endpoint == a.APIAddr {
			t.Errorf("event from the stopped endpoint %s", a.APIAddr)
		}
		var last client.Term
		for _, ev := range w.evs {
			if ev.Err != nil {
				continue
			}
			if ev.Leader.Term < last {
				t.Errorf("terms went back in the watch:\n%s", describeEvents(w.evs))
				break
			}
			last = ev.Leader.Term
		}
		t.Logf("events:\n%s", describeEvents(w.evs))
	})
}
