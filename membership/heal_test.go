package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/electord/electord/election"
)

// cutNet partitions real memberlist nodes on loopback: every node's
// transport drops what it sends to a node of another side while the cut
// holds (packets vanish, dials fail), so neither side hears the other, as
// with iptables DROP in both directions.
type cutNet struct {
	mu    sync.Mutex
	side  map[string]int // gossip address -> side
	cutOn bool
}

func (c *cutNet) blocked(from, to string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cutOn && c.side[from] != c.side[to]
}

func (c *cutNet) cut(sides map[string]int) {
	c.mu.Lock()
	c.side, c.cutOn = sides, true
	c.mu.Unlock()
}

func (c *cutNet) heal() {
	c.mu.Lock()
	c.cutOn = false
	c.mu.Unlock()
}

// cutTransport is one node's transport through a cutNet.
type cutTransport struct {
	memberlist.NodeAwareTransport
	net  *cutNet
	self string
}

var errCut = errors.New("cut by the test")

func (t *cutTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.net.blocked(t.self, addr) {
		return time.Now(), nil
	}
	return t.NodeAwareTransport.WriteTo(b, addr)
}

func (t *cutTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.net.blocked(t.self, a.Addr) {
		return time.Now(), nil
	}
	return t.NodeAwareTransport.WriteToAddress(b, a)
}

func (t *cutTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if t.net.blocked(t.self, addr) {
		return nil, errCut
	}
	return t.NodeAwareTransport.DialTimeout(addr, timeout)
}

func (t *cutTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.net.blocked(t.self, a.Addr) {
		return nil, errCut
	}
	return t.NodeAwareTransport.DialAddressTimeout(a, timeout)
}

// startCut starts node id on loopback behind c, with seeds as Config.Join.
// Each of opts, if any, changes the config first.
func startCut(t *testing.T, c *cutNet, id election.NodeID, seeds []string, opts ...func(*Config)) *Membership {
	t.Helper()
	cfg := Config{Self: metaFor(id, fmt.Sprintf("n%d", id)), BindAddr: "127.0.0.1:0", Preset: "local", Join: seeds,
		Logger: slog.New(&logSink{})}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.wrapTransport = func(nt memberlist.NodeAwareTransport) memberlist.NodeAwareTransport {
		port := nt.(*memberlist.NetTransport).GetAutoBindPort()
		return &cutTransport{NodeAwareTransport: nt, net: c, self: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

// waitViews waits until every node's live view is want[i], within d.
func waitViews(t *testing.T, nodes []*Membership, want [][]election.NodeID, d time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok := true
		var views []string
		for i, n := range nodes {
			got := ids(n.Members())
			views = append(views, fmt.Sprintf("%d:%v", i+1, got))
			if !slices.Equal(got, want[i]) {
				ok = false
			}
		}
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("%s: views not converged within %v: %v", what, d, views)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

// A 2|3 partition held long enough for both sides to declare the other dead
// (and, past GossipToTheDeadTime, forget it) heals once the links are back:
// with seeds (only node 1 is a seed, and nodes 3-5 are not alone, so the old
// "rejoin when alone" never fired) and with no seeds at all (the known
// members are joined again).
func TestPartitionHealsMembership(t *testing.T) {
	for _, tc := range []struct {
		name  string
		seeds bool
	}{{"seeded", true}, {"known-members", false}} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cutNet{}
			var nodes []*Membership
			for i := 1; i <= 5; i++ {
				var seeds []string
				if tc.seeds && i > 1 {
					seeds = []string{nodes[0].LocalAddr()}
				}
				m := startCut(t, c, election.NodeID(i), seeds)
				if i > 1 {
					if _, err := m.Join([]string{nodes[0].LocalAddr()}); err != nil {
						t.Fatal(err)
					}
				}
				nodes = append(nodes, m)
			}
			all := []election.NodeID{1, 2, 3, 4, 5}
			waitViews(t, nodes, [][]election.NodeID{all, all, all, all, all}, deadline, "start")
			for _, m := range nodes {
				m.RetryJoin()
			}

			sides := map[string]int{}
			for i, m := range nodes {
				sides[m.LocalAddr()] = min(i/2, 1) // {1,2} | {3,4,5}
			}
			c.cut(sides)
			a, b := []election.NodeID{1, 2}, []election.NodeID{3, 4, 5}
			split := waitViews(t, nodes, [][]election.NodeID{a, a, b, b, b}, deadline, "partition")
			t.Logf("sides declared each other dead %v after the cut", split)
			time.Sleep(3 * time.Second) // held past GossipToTheDeadTime (2s): names forgotten

			c.heal()
			// Goal: within about RejoinEvery + RejoinMaxBackoff (3s, local);
			// the deadline leaves room for a loaded machine.
			healed := waitViews(t, nodes, [][]election.NodeID{all, all, all, all, all}, deadline, "heal")
			t.Logf("every view converged %v after the heal", healed)
		})
	}
}
