package membership

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/electord/electord/election"
)

// deadline bounds every wait on events; the local preset needs ~1s to
// declare a crashed node dead, more on a loaded machine.
const deadline = 10 * time.Second

// logSink keeps log records so tests can check what was logged, and at
// which level, without writing to t after the test ends.
type logSink struct {
	mu   sync.Mutex
	recs []string
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (s *logSink) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s *logSink) WithGroup(string) slog.Handler            { return s }
func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	s.mu.Lock()
	s.recs = append(s.recs, b.String())
	s.mu.Unlock()
	return nil
}

func (s *logSink) find(prefix, substr string) bool { return s.count(prefix, substr) > 0 }

// count is how many records begin with prefix and contain substr.
func (s *logSink) count(prefix, substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.recs {
		if strings.HasPrefix(r, prefix) && strings.Contains(r, substr) {
			n++
		}
	}
	return n
}

func (s *logSink) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.recs)
}

// waitLogged waits, until deadline, for n's log to hold want records that
// begin with prefix.
func (n *testNode) waitLogged(prefix string, want int) {
	n.t.Helper()
	stop := time.Now().Add(deadline)
	for n.logs.count(prefix, "") < want {
		if time.Now().After(stop) {
			n.t.Fatalf("node %s logged %q %d times in %v, want %d: %v", n.name, prefix, n.logs.count(prefix, ""), deadline, want, n.logs.all())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type testNode struct {
	*Membership
	t       *testing.T
	logs    *logSink
	seen    []Event // every event read
	pending []Event // events read and not yet returned by wait
}

func metaFor(id election.NodeID, name string) Meta {
	return Meta{ID: id, Name: name, Priority: int64(id) % 7,
		PeerAddr: fmt.Sprintf("127.0.0.1:%d", 9000+id%1000), APIAddr: fmt.Sprintf("127.0.0.1:%d", 8000+id%1000),
		HTTPAddr: fmt.Sprintf("127.0.0.1:%d", 7000+id%1000)}
}

func start(t *testing.T, id election.NodeID, name string) *testNode {
	t.Helper()
	logs := &logSink{}
	m, err := New(Config{Self: metaFor(id, name), BindAddr: "127.0.0.1:0", Preset: "local", Logger: slog.New(logs)})
	if err != nil {
		t.Fatalf("New(%d): %v", id, err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return &testNode{Membership: m, t: t, logs: logs}
}

func (n *testNode) join(seeds ...string) {
	n.t.Helper()
	if c, err := n.Join(seeds); err != nil || c < 1 {
		n.t.Fatalf("node %s Join(%v) = %d, %v", n.name, seeds, c, err)
	}
}

// wait returns the first event, read now or earlier and not yet returned,
// that matches, failing after the deadline; bad, if set, fails the test on
// any event before it that must not come.
func (n *testNode) wait(what string, match, bad func(Event) bool) Event {
	n.t.Helper()
	for i, ev := range n.pending {
		if bad != nil && bad(ev) {
			n.t.Fatalf("node %s: unexpected %v while waiting for %s; saw %v", n.name, ev, what, n.seen)
		}
		if match(ev) {
			n.pending = slices.Delete(n.pending, i, i+1)
			return ev
		}
	}
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-n.Events():
			if !ok {
				n.t.Fatalf("node %s: events closed waiting for %s; saw %v", n.name, what, n.seen)
			}
			n.seen = append(n.seen, ev)
			if bad != nil && bad(ev) {
				n.t.Fatalf("node %s: unexpected %v while waiting for %s; saw %v", n.name, ev, what, n.seen)
			}
			if match(ev) {
				return ev
			}
			n.pending = append(n.pending, ev)
		case <-timer.C:
			n.t.Fatalf("node %s: no %s within %v; saw %v", n.name, what, deadline, n.seen)
		}
	}
}

func is(typ EventType, id election.NodeID) func(Event) bool {
	return func(ev Event) bool { return ev.Type == typ && ev.Member.ID == id }
}

func about(id election.NodeID, types ...EventType) func(Event) bool {
	return func(ev Event) bool { return ev.Member.ID == id && slices.Contains(types, ev.Type) }
}

func ids(ms []Meta) []election.NodeID {
	out := make([]election.NodeID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// cluster starts nodes with the given ids, all joining through the first,
// and waits until each has seen a Join for every other.
func cluster(t *testing.T, idList ...election.NodeID) []*testNode {
	nodes := make([]*testNode, len(idList))
	for i, id := range idList {
		nodes[i] = start(t, id, fmt.Sprintf("n%d", id))
		if i > 0 {
			nodes[i].join(nodes[0].LocalAddr())
		}
	}
	for _, n := range nodes {
		for _, o := range nodes {
			if o != n {
				ev := n.wait(fmt.Sprintf("join of %d", o.cfg.Self.ID), is(Join, o.cfg.Self.ID), nil)
				if ev.Member != o.cfg.Self {
					t.Fatalf("node %s: join of %d has meta %+v, want %+v", n.name, o.cfg.Self.ID, ev.Member, o.cfg.Self)
				}
			}
		}
	}
	return nodes
}

func TestThreeNodesJoinThroughOneSeed(t *testing.T) {
	nodes := cluster(t, 1, 2, 3)
	want := []Meta{nodes[0].cfg.Self, nodes[1].cfg.Self, nodes[2].cfg.Self}
	for _, n := range nodes {
		if got := n.Members(); !slices.Equal(got, want) {
			t.Errorf("node %s: Members() = %+v, want %+v", n.name, got, want)
		}
		for _, ev := range n.seen {
			if ev.Type != Join {
				t.Errorf("node %s: unexpected event %+v", n.name, ev)
			}
		}
	}
}

func TestLocalAddrIsThePickedPort(t *testing.T) {
	n := start(t, 1, "a")
	host, port, err := net.SplitHostPort(n.LocalAddr())
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("LocalAddr() = %q", n.LocalAddr())
	}
	if n.BoundAddr() != n.LocalAddr() {
		t.Fatalf("BoundAddr() = %q, LocalAddr() = %q", n.BoundAddr(), n.LocalAddr())
	}
	// The port really is ours: gossip listens on it over TCP.
	c, err := net.DialTimeout("tcp", n.LocalAddr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestCleanLeaveIsLeaveNotDead(t *testing.T) {
	nodes := cluster(t, 1, 2, 3)
	if err := nodes[2].Leave(2 * time.Second); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	for _, n := range nodes[:2] {
		n.wait("leave of 3", is(Leave, 3), is(Dead, 3))
		if got := ids(n.Members()); slices.Contains(got, 3) {
			t.Errorf("node %s: Members() = %v after 3 left", n.name, got)
		}
	}
	if err := nodes[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
}

func TestShutdownWithoutLeaveIsDead(t *testing.T) {
	nodes := cluster(t, 1, 2, 3)
	if err := nodes[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:2] {
		n.wait("death of 3", is(Dead, 3), is(Leave, 3))
	}
	if _, ok := <-nodes[2].Events(); ok {
		t.Error("Events not closed by Shutdown")
	}
	if err := nodes[2].Shutdown(); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	if err := nodes[2].Leave(time.Second); err == nil {
		t.Error("Leave after Shutdown: no error")
	}
}

func TestDuplicateIDIsAConflict(t *testing.T) {
	a := start(t, 7, "first")
	dup := start(t, 7, "second")
	dup.join(a.LocalAddr())
	for _, n := range []*testNode{a, dup} {
		ev := n.wait("conflict", is(Conflict, 7), about(7, Join))
		if !strings.Contains(ev.Detail, a.LocalAddr()) || !strings.Contains(ev.Detail, dup.LocalAddr()) {
			t.Errorf("node at %s: conflict detail %q does not name both %s and %s", n.LocalAddr(), ev.Detail, a.LocalAddr(), dup.LocalAddr())
		}
		if !n.logs.find("ERROR", "duplicate node id 7") {
			t.Errorf("node at %s: no Error log for the duplicate id", n.LocalAddr())
		}
		if got := n.Members(); len(got) != 1 || got[0] != n.cfg.Self {
			t.Errorf("node at %s: Members() = %+v", n.LocalAddr(), got)
		}
	}
}

func TestSlotCollisionIsAConflictAndNoJoin(t *testing.T) {
	const a, b, c = 1, 1<<election.SlotBits + 1, 3 // a and b share slot 1
	na := start(t, a, "a")
	nb := start(t, b, "b") // starts after a: b is the later one
	nb.join(na.LocalAddr())

	ev := na.wait("slot conflict", is(Conflict, b), about(b, Join))
	if !strings.Contains(ev.Detail, "slot") || !strings.Contains(ev.Detail, nb.LocalAddr()) {
		t.Errorf("detail %q", ev.Detail)
	}
	if !na.logs.find("ERROR", "term slot collision") {
		t.Error("no Error log for the slot collision")
	}
	// b sees that it is the later one, and admits a.
	nb.wait("conflict about itself", is(Conflict, a), nil)
	nb.wait("join of a", is(Join, a), nil)

	// A third node joins: a sees it, and still no Join for b came before.
	nc := start(t, c, "c")
	nc.join(na.LocalAddr())
	na.wait("join of c", is(Join, c), about(b, Join))
	if got := ids(na.Members()); !slices.Equal(got, []election.NodeID{a, c}) {
		t.Errorf("a: Members() = %v, want [%d %d]", got, a, c)
	}
	// c learned of a and b at once; whatever the order, it settles on a.
	nc.wait("join of a", is(Join, a), nil)
	waitFor(t, "c admits a, not b", func() bool { return slices.Equal(ids(nc.Members()), []election.NodeID{a, c}) })

	// When a leaves, b is the only one with the slot and gets its Join.
	if err := na.Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	nc.wait("leave of a", is(Leave, a), nil)
	nc.wait("join of b", is(Join, b), nil)
}

// waitFor polls cond (state that is updated before its events are sent).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("no %s within %v", what, deadline)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestJoinByDNSName(t *testing.T) {
	a := start(t, 1, "a")
	b := start(t, 2, "b")
	_, port, _ := net.SplitHostPort(a.LocalAddr())
	// localhost may also resolve to ::1, where nothing listens: every address
	// is tried, and one answering is enough.
	b.join("localhost:" + port)
	a.wait("join of b", is(Join, 2), nil)
	b.wait("join of a", is(Join, 1), nil)
}

func TestJoinSkipsSelfAndReportsFailures(t *testing.T) {
	a := start(t, 1, "a")
	if n, err := a.Join([]string{a.LocalAddr()}); n != 0 || err != nil {
		t.Errorf("Join(self) = %d, %v; want 0, nil", n, err)
	}
	if n, err := a.Join(nil); n != 0 || err != nil {
		t.Errorf("Join(no seeds) = %d, %v; want 0, nil", n, err)
	}
	// A port nobody listens on: take one and free it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	if n, err := a.Join([]string{dead}); n != 0 || err == nil || !strings.Contains(err.Error(), dead) {
		t.Errorf("Join(%s) = %d, %v; want an error naming it", dead, n, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.JoinContext(ctx, []string{"electord-no-such-host.invalid"}); err == nil {
		t.Error("JoinContext with a cancelled context and an unresolvable name: no error")
	}
}

func TestUpdate(t *testing.T) {
	nodes := cluster(t, 1, 2)
	meta := nodes[1].cfg.Self
	meta.Priority = 42
	if err := nodes[1].SetMeta(meta, time.Second); err != nil {
		t.Fatal(err)
	}
	ev := nodes[0].wait("update of 2", is(Update, 2), nil)
	if ev.Member != meta {
		t.Errorf("update meta %+v, want %+v", ev.Member, meta)
	}
	if err := nodes[1].SetMeta(Meta{ID: 9}, time.Second); err == nil {
		t.Error("SetMeta with another id: no error")
	}
}

// rawDelegate gossips fixed metadata, for nodes this package would not make.
type rawDelegate struct{ meta []byte }

func (d rawDelegate) NodeMeta(int) []byte               { return d.meta }
func (rawDelegate) NotifyMsg([]byte)                    {}
func (rawDelegate) GetBroadcasts(int, int) [][]byte     { return nil }
func (rawDelegate) LocalState(bool) []byte              { return nil }
func (rawDelegate) MergeRemoteState(buf []byte, _ bool) {}

func TestUndecodableMetaIsAConflictNotAJoin(t *testing.T) {
	a := start(t, 1, "a")
	for _, tc := range []struct {
		name, meta, want string
	}{
		{"9", "not json", "not valid JSON"},
		{"10", `{"id":11}`, "gossip name"},
	} {
		mc := memberlist.DefaultLocalConfig()
		mc.Name, mc.BindAddr, mc.BindPort = tc.name, "127.0.0.1", 0
		mc.Delegate = rawDelegate{[]byte(tc.meta)}
		mc.LogOutput = nil
		mc.Logger = memberlistLogger(slog.New(slog.DiscardHandler), nil, nil)
		raw, err := memberlist.Create(mc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = raw.Shutdown() })
		if _, err := raw.Join([]string{a.LocalAddr()}); err != nil {
			t.Fatal(err)
		}
		id := nameID(tc.name)
		ev := a.wait("conflict about "+tc.name, is(Conflict, id), about(id, Join))
		if !strings.Contains(ev.Detail, "metadata") || !strings.Contains(ev.Detail, tc.want) {
			t.Errorf("detail %q", ev.Detail)
		}
		if got := ids(a.Members()); !slices.Equal(got, []election.NodeID{1}) {
			t.Errorf("Members() = %v", got)
		}
	}
}
