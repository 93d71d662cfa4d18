package status

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
	"github.com/electord/electord/transport"
)

// staticGossip is a Membership that reports a fixed set of other members
// alive, as a Kubernetes pod's gossip would.
type staticGossip struct{ events chan node.MemberEvent }

func (g *staticGossip) Events() <-chan node.MemberEvent { return g.events }
func (g *staticGossip) Leave(time.Duration) error       { return nil }
func (g *staticGossip) Shutdown() error                 { return nil }

// runNode runs a real node (in-memory transport, nobody answers) whose
// gossip reports others alive, and waits until it lists them.
func runNode(t *testing.T, self node.Meta, others ...node.Meta) *node.Node {
	t.Helper()
	g := &staticGossip{events: make(chan node.MemberEvent, len(others))}
	for _, m := range others {
		g.events <- node.MemberEvent{Type: node.MemberJoin, Member: m}
	}
	in := node.NewInbox(0)
	// The node's own tests' timings: elections settle quickly.
	n, err := node.New(node.Config{Self: self, Algorithm: "bully", Transport: transport.NewNetwork().Join(self.ID, in), Inbox: in,
		Tick: 10 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 250 * time.Millisecond,
		NewMembership: func() (node.Membership, error) { return g, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go n.Run(ctx)
	t.Cleanup(func() { cancel(); <-n.Done() })
	deadline := time.Now().Add(5 * time.Second)
	for len(n.Members()) < 1+len(others) {
		if time.Now().After(deadline) {
			t.Fatalf("the node lists %d members after 5s, want %d", len(n.Members()), 1+len(others))
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
	return n
}

// loopbackAsker answers as dialling an address from the serving node
// does: a loopback address (and the node's own) reaches the node's own
// API, so the answer is the node's own view; others answer from answers.
type loopbackAsker struct {
	n       *node.Node
	answers map[string]answer
	mu      sync.Mutex
	asked   []string
}

func (a *loopbackAsker) endRound() {}

func (a *loopbackAsker) ask(_ context.Context, _ election.NodeID, addr string) answer {
	a.mu.Lock()
	a.asked = append(a.asked, addr)
	a.mu.Unlock()
	if ans, ok := a.answers[addr]; ok {
		return ans
	}
	li := a.n.Leader()
	return answer{leader: li.ID, term: li.Term, state: li.State}
}

// TestLoopbackAPIMembersAreNotAsked: as in the shipped Kubernetes
// manifests, every member advertises the api address 127.0.0.1:7070 from
// its own pod (peer addresses are pod IPs). Asking them would ask the
// serving node itself, which always agrees: they are not asked, shown
// "not asked: its api address is loopback" (neutral, not in the
// majority), and the agreement card says how many could be asked. A
// member with a reachable api address is still asked, and one on this
// host (a dev cluster: loopback peer address) too.
func TestLoopbackAPIMembersAreNotAsked(t *testing.T) {
	pod := func(id election.NodeID, ip string) node.Meta {
		return node.Meta{ID: id, Name: "my-app-" + ip, PeerAddr: ip + ":7071", APIAddr: "127.0.0.1:7070"}
	}
	n := runNode(t, pod(1, "10.0.0.1"), pod(2, "10.0.0.2"), pod(3, "10.0.0.3"),
		node.Meta{ID: 4, Name: "reachable", PeerAddr: "10.0.0.4:7071", APIAddr: "10.0.0.4:7070"},
		node.Meta{ID: 5, Name: "dev", PeerAddr: "127.0.0.1:17071", APIAddr: "127.0.0.1:17070"})
	a := &loopbackAsker{n: n, answers: map[string]answer{
		"10.0.0.4:7070":   {leader: 4, term: 99, state: node.StateLeader},
		"127.0.0.1:17070": {leader: 4, term: 99, state: node.StateFollower},
	}}
	v := build(context.Background(), n, a, time.Second)

	for _, addr := range a.asked {
		if addr == "127.0.0.1:7070" {
			t.Fatalf("asked %v: 127.0.0.1:7070 is this pod's own API, not members 2 and 3", a.asked)
		}
	}
	if len(a.asked) != 2 {
		t.Fatalf("asked %v, want 10.0.0.4:7070 and 127.0.0.1:17070", a.asked)
	}
	rows := map[election.NodeID]Member{}
	for _, r := range v.Bully {
		rows[r.ID] = r
	}
	for _, id := range []election.NodeID{2, 3} {
		r := rows[id]
		if r.Answered || r.Differs || r.NotAsked != "its api address is loopback" || r.Liveness != "alive" {
			t.Fatalf("member %d: %+v, want not asked (its api address is loopback), alive by gossip, not flagged", id, r)
		}
	}
	if r := rows[4]; !r.Answered || r.SeesID != 4 {
		t.Fatalf("member 4 (reachable api address): %+v, want asked, naming node 4", r)
	}
	if r := rows[5]; !r.Answered || r.SeesID != 4 {
		t.Fatalf("member 5 (on this host): %+v, want asked, naming node 4", r)
	}
	// 1 (this node) and 4, 5 answered: 2 of 3 name node 4 in term 99.
	if v.Live != 5 || v.Askable != 3 || !strings.Contains(v.Majority, "of 3 answering") {
		t.Fatalf("live %d, askable %d, majority %q; want 5, 3, out of 3 answering", v.Live, v.Askable, v.Majority)
	}

	s, err := New(Config{Node: n})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, "view", v); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`data-live="5" data-askable="3"`, "3 of 5 live members could be asked", "2 not: their api address is loopback",
		`class="alive notasked"`, "not asked: its api address is loopback"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("no %q in the view:\n%s", want, b.String())
		}
	}
}

// TestOnlyLoopbackMembersCannotCompare: when every other member's api
// address is loopback, only this node answers: the card says it cannot
// compare rather than "All agree".
func TestOnlyLoopbackMembersCannotCompare(t *testing.T) {
	pod := func(id election.NodeID, ip string) node.Meta {
		return node.Meta{ID: id, Name: "my-app", PeerAddr: ip + ":7071", APIAddr: "127.0.0.1:7070"}
	}
	n := runNode(t, pod(1, "10.0.0.1"), pod(2, "10.0.0.2"), pod(3, "10.0.0.3"))
	a := &loopbackAsker{n: n}
	v := build(context.Background(), n, a, time.Second)
	if len(a.asked) != 0 || v.Live != 3 || v.Askable != 1 || v.Disagree {
		t.Fatalf("asked %v, live %d, askable %d, disagree %v; want nobody asked, 3, 1, false", a.asked, v.Live, v.Askable, v.Disagree)
	}
	s, err := New(Config{Node: n})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, "view", v); err != nil {
		t.Fatal(err)
	}
	if html := b.String(); strings.Contains(html, "All agree") || !strings.Contains(html, "Cannot compare") ||
		!strings.Contains(html, "1 of 3 live members could be asked") {
		t.Fatalf("the agreement card with no member askable:\n%s", html)
	}
}

func TestNotAsked(t *testing.T) {
	me := node.MemberInfo{ID: 1, PeerAddr: "10.0.0.1:7071", APIAddr: "10.0.0.1:7070"}
	for _, tc := range []struct {
		peer, api, want string
	}{
		{"10.0.0.2:7071", "10.0.0.2:7070", ""},
		{"10.0.0.2:7071", "127.0.0.1:7070", "its api address is loopback"},
		{"10.0.0.2:7071", "[::1]:7070", "its api address is loopback"},
		{"10.0.0.2:7071", "localhost:7070", "its api address is loopback"},
		{"10.0.0.2:7071", "10.0.0.1:7070", "its api address is this node's own"},
		{"127.0.0.1:7171", "127.0.0.1:7170", ""},   // a dev cluster: on this host
		{"10.0.0.1:7171", "127.0.0.1:7170", ""},    // another process on this host
		{"my-app-2.x:7071", "my-app-2.x:7070", ""}, // names are dialled
	} {
		if got := notAsked(node.MemberInfo{ID: 2, PeerAddr: tc.peer, APIAddr: tc.api}, me); got != tc.want {
			t.Errorf("peer %s, api %s: %q, want %q", tc.peer, tc.api, got, tc.want)
		}
	}
}
