// Package apitest provides a fake cluster whose nodes implement api.Backend,
// and helpers that serve them on loopback, for tests of the API, the client
// library and electctl. It holds no election logic: leadership changes only
// when a test or a command says so.
package apitest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/electord/electord/api"
	"github.com/electord/electord/config"
	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
	"google.golang.org/grpc"
)

// Cluster is a set of fake nodes that share one view of the cluster. Its
// methods are safe for concurrent use.
type Cluster struct {
	mu        sync.Mutex
	algorithm string
	members   []node.MemberInfo // in id order
	killed    map[election.NodeID]bool
	leader    election.NodeID
	term      election.Term
	since     time.Time
	nodes     map[election.NodeID]*Node
	blocked   bool
	bufSize   int
	// subsChanged is closed and replaced when a subscription opens or closes.
	subsChanged chan struct{}
}

// NewCluster returns n members with ids 1..n, named node-1..node-n, with
// priority equal to their id, running "bully", and no leader (term 0).
func NewCluster(n int) *Cluster {
	c := &Cluster{algorithm: "bully", killed: map[election.NodeID]bool{}, nodes: map[election.NodeID]*Node{}, bufSize: 16, subsChanged: make(chan struct{})}
	for i := 1; i <= n; i++ {
		id := election.NodeID(i)
		c.members = append(c.members, node.MemberInfo{
			ID: id, Name: name(id), Priority: int64(i), PeerAddr: "127.0.0.1:0", Algorithm: c.algorithm,
		})
		c.nodes[id] = &Node{c: c, id: id, subs: map[*Sub]struct{}{}, exited: make(chan struct{})}
	}
	return c
}

func name(id election.NodeID) string { return "node-" + strconv.FormatUint(uint64(id), 10) }

// Node returns the fake node id (nil if there is none).
func (c *Cluster) Node(id election.NodeID) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

// SetAPIAddr records the api address of id, as Members reports it.
func (c *Cluster) SetAPIAddr(id election.NodeID, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.members {
		if c.members[i].ID == id {
			c.members[i].APIAddr = addr
		}
	}
}

// SetSubscriptionBuffer sets the channel size of later subscriptions.
func (c *Cluster) SetSubscriptionBuffer(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bufSize = n
}

// Since0 is the fake clock's origin: a leader of epoch e is leader since
// Since0 + e seconds.
var Since0 = time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)

// Elect makes id the leader in a new term (one epoch above the current).
func (c *Cluster) Elect(id election.NodeID) {
	c.mu.Lock()
	c.elect(id)
	c.mu.Unlock()
}

func (c *Cluster) elect(id election.NodeID) {
	c.term = election.NextTerm(c.term, id)
	c.leader = id
	// A fixed clock keeps outputs reproducible: epoch e began e seconds after Since0.
	c.since = Since0.Add(time.Duration(c.term.Epoch()) * time.Second)
	c.publish()
}

// NoLeader makes every node lose its leader; the term stays.
func (c *Cluster) NoLeader() {
	c.mu.Lock()
	c.leader = 0
	c.publish()
	c.mu.Unlock()
}

// SetBlocked makes commands (Kill, Revive, Resign, Transfer) wait for their
// context to end instead of acting, as a node whose loop is stuck would.
func (c *Cluster) SetBlocked(b bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.blocked = b
}

// Killed reports whether id was killed.
func (c *Cluster) Killed(id election.NodeID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.killed[id]
}

// Term is the current term.
func (c *Cluster) Term() election.Term {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.term
}

func (c *Cluster) member(id election.NodeID) (node.MemberInfo, bool) {
	for _, m := range c.members {
		if m.ID == id {
			return m, true
		}
	}
	return node.MemberInfo{}, false
}

// view is what node id sees. c.mu is held.
func (c *Cluster) view(id election.NodeID) node.LeaderInfo {
	if c.killed[id] {
		return node.LeaderInfo{Term: c.term, State: node.StateNoLeader}
	}
	if c.leader == 0 {
		return node.LeaderInfo{Term: c.term, State: node.StateElecting}
	}
	m, _ := c.member(c.leader)
	li := node.LeaderInfo{ID: c.leader, Name: m.Name, Address: m.APIAddr, Term: c.term, Since: c.since, Self: c.leader == id, State: node.StateFollower}
	if li.Self {
		li.State = node.StateLeader
	}
	return li
}

// publish sends every node's view to its subscribers. c.mu is held.
func (c *Cluster) publish() {
	for id, n := range c.nodes {
		li := c.view(id)
		for s := range n.subs {
			s.offer(li)
		}
	}
}

// Node is one fake member; it implements api.Backend.
type Node struct {
	c        *Cluster
	id       election.NodeID
	subs     map[*Sub]struct{} // guarded by c.mu
	exitOnce sync.Once
	exited   chan struct{}
}

var _ api.Backend = (*Node)(nil)

// Self implements api.Backend.
func (n *Node) Self() election.NodeID { return n.id }

// Leader implements api.Backend.
func (n *Node) Leader() node.LeaderInfo {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	return n.c.view(n.id)
}

// Status implements api.Backend.
func (n *Node) Status() node.StatusInfo {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	return node.StatusInfo{Self: n.id, Algorithm: n.c.algorithm, Leader: n.c.view(n.id), Members: n.c.memberList(), Killed: n.c.killed[n.id]}
}

// Members implements api.Backend.
func (n *Node) Members() []node.MemberInfo {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	return n.c.memberList()
}

func (c *Cluster) memberList() []node.MemberInfo {
	ms := slices.Clone(c.members)
	for i := range ms {
		m := &ms[i]
		m.Alive = !c.killed[m.ID]
		m.Term = c.term
		switch {
		case !m.Alive:
			m.Role = ""
		case m.ID == c.leader:
			m.Role = node.StateLeader
		default:
			m.Role = node.StateFollower
		}
	}
	return ms
}

// command runs f under c.mu, or waits for ctx if the cluster is blocked.
func (n *Node) command(ctx context.Context, f func() error) error {
	n.c.mu.Lock()
	blocked := n.c.blocked
	n.c.mu.Unlock()
	if blocked {
		<-ctx.Done()
		return ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	return f()
}

// Kill implements api.Backend: the node stops leading and counts as dead.
func (n *Node) Kill(ctx context.Context) error {
	return n.command(ctx, func() error {
		c := n.c
		c.killed[n.id] = true
		if c.leader == n.id {
			c.leader = 0
		}
		c.publish()
		return nil
	})
}

// Revive implements api.Backend.
func (n *Node) Revive(ctx context.Context) error {
	return n.command(ctx, func() error {
		delete(n.c.killed, n.id)
		n.c.publish()
		return nil
	})
}

// Resign implements api.Backend: the best-ranked other live member leads
// in a new term.
func (n *Node) Resign(ctx context.Context) error {
	return n.command(ctx, func() error {
		c := n.c
		if c.killed[n.id] {
			return node.ErrKilled
		}
		if c.leader != n.id {
			return node.ErrNotLeader
		}
		var best election.NodeID
		var bestPrio int64
		for _, m := range c.members {
			if m.ID != n.id && !c.killed[m.ID] && (best == 0 || m.Priority > bestPrio) {
				best, bestPrio = m.ID, m.Priority
			}
		}
		if best == 0 {
			return election.ErrNoCandidate
		}
		c.elect(best)
		return nil
	})
}

// Transfer implements api.Backend.
func (n *Node) Transfer(ctx context.Context, id election.NodeID) error {
	return n.command(ctx, func() error {
		c := n.c
		if c.killed[n.id] {
			return node.ErrKilled
		}
		if c.leader != n.id {
			return node.ErrNotLeader
		}
		if _, ok := c.member(id); !ok {
			return node.ErrUnknownNode
		}
		if c.killed[id] {
			return election.ErrNoCandidate
		}
		c.elect(id)
		return nil
	})
}

// Exit implements api.Backend: it closes Exited.
func (n *Node) Exit() { n.exitOnce.Do(func() { close(n.exited) }) }

// Exited is closed once Exit was called.
func (n *Node) Exited() <-chan struct{} { return n.exited }

// Subscribe implements api.Backend. Unlike node's, the subscription does
// not start with the current state: the API must send that itself.
func (n *Node) Subscribe() (api.Subscription, error) {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	s := &Sub{n: n, ch: make(chan node.LeaderInfo, max(n.c.bufSize, 1))}
	n.subs[s] = struct{}{}
	n.c.subsNotify()
	return s, nil
}

// subsNotify wakes WaitSubscribers. c.mu is held.
func (c *Cluster) subsNotify() {
	close(c.subsChanged)
	c.subsChanged = make(chan struct{})
}

// WaitSubscribers waits until n has exactly want open subscriptions.
func (n *Node) WaitSubscribers(ctx context.Context, want int) error {
	for {
		n.c.mu.Lock()
		got, ch := len(n.subs), n.c.subsChanged
		n.c.mu.Unlock()
		if got == want {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("node %d has %d subscriptions, want %d: %w", n.id, got, want, ctx.Err())
		}
	}
}

// Subscribers counts the open subscriptions of n.
func (n *Node) Subscribers() int {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	return len(n.subs)
}

// Sub is a fake subscription: a slow reader loses the oldest events.
type Sub struct {
	n       *Node
	ch      chan node.LeaderInfo
	dropped uint64 // guarded by n.c.mu
	closed  bool   // guarded by n.c.mu
}

// C implements api.Subscription.
func (s *Sub) C() <-chan node.LeaderInfo { return s.ch }

// Dropped implements api.Subscription.
func (s *Sub) Dropped() uint64 {
	s.n.c.mu.Lock()
	defer s.n.c.mu.Unlock()
	return s.dropped
}

// Close implements api.Subscription.
func (s *Sub) Close() {
	s.n.c.mu.Lock()
	defer s.n.c.mu.Unlock()
	if !s.closed {
		s.closed = true
		delete(s.n.subs, s)
		close(s.ch)
		s.n.c.subsNotify()
	}
}

// offer never blocks: it drops the oldest pending event. c.mu is held.
func (s *Sub) offer(li node.LeaderInfo) {
	for {
		select {
		case s.ch <- li:
			return
		default:
		}
		select {
		case <-s.ch:
			s.dropped++
		default:
		}
	}
}

// CloseSubscriptions ends every subscription of every node, as a stopping
// node would.
func (c *Cluster) CloseSubscriptions() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		for s := range n.subs {
			s.closed = true
			delete(n.subs, s)
			close(s.ch)
		}
	}
	c.subsNotify()
}

// Server is an api gRPC server on loopback.
type Server struct {
	// Addr is the address it listens on (127.0.0.1:port).
	Addr string
	srv  *grpc.Server
	done chan struct{}
}

// Serve serves the Elector service of b on 127.0.0.1 at a free port.
func Serve(b api.Backend) (*Server, error) {
	return ServeAt("127.0.0.1:0", b)
}

// Limits are the API's bounds at config.Default(), as a node serves it.
func Limits() api.Limits {
	d := config.Default()
	return api.Limits{MaxWatchers: d.MaxWatchers, MaxConns: d.MaxConns, MaxStreams: uint32(d.MaxStreams),
		MaxMessageBytes: d.MaxMessageBytes, MaxHeaderListBytes: d.MaxHeaderListBytes,
		HandshakeTimeout: d.HandshakeTimeout, IdleTimeout: d.IdleTimeout}
}

// ServeAt serves the Elector service of b on addr with the bounds of
// Limits.
func ServeAt(addr string, b api.Backend) (*Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv, err := api.NewLimitedGRPCServer(b, Limits())
	if err != nil {
		lis.Close()
		return nil, err
	}
	s := &Server{Addr: lis.Addr().String(), srv: srv, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(lis)
	}()
	return s, nil
}

// Stop closes the listener and every connection at once (as a crash
// would) and waits for the server to return.
func (s *Server) Stop() {
	s.srv.Stop()
	<-s.done
}

// ServeAll serves every node of c on its own loopback port and records the
// addresses as the members' api addresses. It returns the servers in id
// order.
func (c *Cluster) ServeAll() ([]*Server, error) {
	c.mu.Lock()
	ids := make([]election.NodeID, 0, len(c.nodes))
	for id := range c.nodes {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	slices.Sort(ids)
	var out []*Server
	for _, id := range ids {
		s, err := Serve(c.Node(id))
		if err != nil {
			for _, o := range out {
				o.Stop()
			}
			return nil, err
		}
		c.SetAPIAddr(id, s.Addr)
		out = append(out, s)
	}
	return out, nil
}
