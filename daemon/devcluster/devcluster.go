// Package devcluster runs a local cluster of real nodes in one process
// (electord dev, and the integration tests): N daemons on 127.0.0.1, each
// seeded with every other node's gossip address, with every leader change
// printed.
package devcluster

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/electord/electord/config"
	"github.com/electord/electord/daemon"
	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
)

// Options configure a local cluster.
type Options struct {
	Nodes     int
	Algorithm string
	Quorum    int
	Preempt   bool
	// BootstrapExpect is every node's bootstrap-expect: 0 means Nodes (a
	// dev cluster knows its size), -1 turns it off.
	BootstrapExpect int
	// PeerServer is every node's inbound peer server (grpc or lf); empty
	// keeps config.Default's.
	PeerServer string
	// BasePort: node i (1-based) uses api base+10(i-1), peer +1, gossip +2,
	// http +3, health (the status page) +4. 0 picks free ports.
	BasePort int
	DataDir  string // "" = a temporary directory, removed on Stop
	LogLevel string
	// LogOutput receives the nodes' logs (text); nil means os.Stderr.
	LogOutput io.Writer
	// Tune may change each node's config before it starts (tests).
	Tune func(*config.Config)
	// Peers, if set, gives node id its daemon.Options.Peers (tests: see
	// daemontest.Network).
	Peers func(id election.NodeID) daemon.PeerHook
	// Out receives the addresses and every leader change; nil discards.
	Out io.Writer
}

// Cluster is a local cluster of real nodes in one process.
type Cluster struct {
	Nodes   []*daemon.Daemon
	tmp     string
	out     io.Writer
	mu      sync.Mutex
	start   time.Time
	views   map[uint64]node.LeaderInfo
	agreed  node.LeaderInfo
	stopped map[uint64]bool // ended by electctl kill --exit
	// disagree is the last disagreement printed ("" while none is), since
	// when it began; pending: one began and is not reported yet.
	disagree      string
	disagreeSince float64
	pending       bool
	grace         time.Duration // how long a disagreement lasts before it is reported
	stopping      bool
	watchWG       sync.WaitGroup
}

// Config is the configuration of node i (1-based) of a dev cluster:
// config.Default() with the dev cluster's addresses, data directory,
// seeds and options, the local gossip preset (every node is on this
// machine) and warn logs unless opts say otherwise.
func Config(i int, opts Options, dataDir string, join []string) config.Config {
	port := func(off int) string {
		if opts.BasePort == 0 {
			return "127.0.0.1:0"
		}
		return "127.0.0.1:" + strconv.Itoa(opts.BasePort+10*(i-1)+off)
	}
	c := config.Default()
	c.ID, c.Name = uint64(i), "node-"+strconv.Itoa(i)
	c.APIAddr, c.PeerAddr, c.GossipAddr, c.HTTPAddr, c.HealthAddr = port(0), port(1), port(2), port(3), port(4)
	c.Join, c.DataDir = join, filepath.Join(dataDir, "node-"+strconv.Itoa(i))
	c.Quorum, c.Preempt, c.BootstrapExpect = opts.Quorum, opts.Preempt, opts.Nodes
	c.GossipPreset, c.LogLevel = "local", "warn"
	if opts.Algorithm != "" {
		c.Algorithm = opts.Algorithm
	}
	if opts.PeerServer != "" {
		c.PeerServer = opts.PeerServer
	}
	if opts.LogLevel != "" {
		c.LogLevel = opts.LogLevel
	}
	if opts.BootstrapExpect != 0 {
		c.BootstrapExpect = max(0, opts.BootstrapExpect)
	}
	if opts.Tune != nil {
		opts.Tune(&c)
	}
	return c
}

// Start starts a local cluster, node 1 first. Every node's join list names
// every other node's gossip address (with BasePort 0, ports are reserved
// first, see FreePort), so any node, node 1 included, finds the cluster again after
// `electctl kill N; electctl revive N` or a partition.
func Start(opts Options) (*Cluster, error) {
	if opts.Algorithm == "" {
		opts.Algorithm = config.Default().Algorithm // for the banner
	}
	c := &Cluster{out: opts.Out, start: time.Now(), views: map[uint64]node.LeaderInfo{}, stopped: map[uint64]bool{}}
	if c.out == nil {
		c.out = io.Discard
	}
	dir := opts.DataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "electord-dev-")
		if err != nil {
			return nil, err
		}
		dir, c.tmp = tmp, tmp
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(opts.LogLevel))
	logOut := opts.LogOutput
	if logOut == nil {
		logOut = os.Stderr
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))
	gossip, err := gossipAddrs(opts)
	if err != nil {
		return nil, err
	}
	for i := 1; i <= opts.Nodes; i++ {
		join := slices.Concat(gossip[:i-1], gossip[i:])
		cfg := Config(i, opts, dir, join)
		if cfg.GossipAddr == "127.0.0.1:0" { // not set by Tune
			cfg.GossipAddr = gossip[i-1]
		}
		o := daemon.Options{Logger: log.With("dev-node", i)}
		// electctl kill --exit: this node's daemon stops for good; the
		// process and the other nodes go on.
		var self atomic.Pointer[daemon.Daemon]
		o.Exit = func() { go c.exit(self.Load()) }
		if opts.Peers != nil {
			o.Peers = opts.Peers(election.NodeID(cfg.ID))
		}
		d, err := daemon.Start(cfg, o)
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		self.Store(d)
		c.Nodes = append(c.Nodes, d)
		c.grace = 2 * cfg.HeartbeatInterval
	}
	fmt.Fprintf(c.out, "electord dev: %d nodes, algorithm %s, quorum %d, preempt %v, data in %s\n", opts.Nodes, opts.Algorithm, opts.Quorum, opts.Preempt, dir)
	fmt.Fprintf(c.out, "%-4s %-8s %-21s %-21s %-21s %-21s %s\n", "ID", "NAME", "API", "PEER", "HTTP", "GOSSIP", "STATUS PAGE")
	for _, d := range c.Nodes {
		fmt.Fprintf(c.out, "%-4d %-8s %-21s %-21s %-21s %-21s %s\n", d.Config.ID, d.Config.Name, d.APIAddr, d.PeerAddr, d.HTTPAddr, d.GossipAddr, StatusURL(d))
	}
	fmt.Fprintf(c.out, "try: electctl --endpoints %s status    (or open %s)\n", c.Nodes[0].APIAddr, StatusURL(c.Nodes[0]))
	for _, d := range c.Nodes {
		c.watch(d)
	}
	return c, nil
}

// gossipAddrs is every node's gossip address: from BasePort, or with
// BasePort 0 a free port for each (see FreePort).
func gossipAddrs(opts Options) ([]string, error) {
	addrs := make([]string, opts.Nodes)
	for i := range addrs {
		if opts.BasePort != 0 {
			addrs[i] = "127.0.0.1:" + strconv.Itoa(opts.BasePort+10*i+2)
			continue
		}
		p, err := FreePort()
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", i+1, err)
		}
		addrs[i] = "127.0.0.1:" + strconv.Itoa(p)
	}
	return addrs, nil
}

// FreePort picks loopback ports in [portLo, portHi): below Linux's
// ephemeral range (32768-60999), so that no ":0" listener of this process or
// another takes one between the pick and the bind.
const portLo, portHi = 10000, 32000

var ports struct {
	mu   sync.Mutex
	next int
}

// FreePort returns a loopback port free for both TCP and UDP (gossip binds
// both) that this process has not handed out before (the integration tests
// take theirs here too, so the two never collide), nor another process
// holds by claimPort while it runs: between the pick and the bind another
// test binary's pick of the same port went unseen (two packages' tests run
// at once), and a node failed to start with "address already in use".
func FreePort() (int, error) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.next == 0 {
		ports.next = portLo + (os.Getpid()*97)%(portHi-portLo)
	}
	for range portHi - portLo {
		p := ports.next
		ports.next++
		if ports.next >= portHi {
			ports.next = portLo
		}
		if !claimPort(p) {
			continue
		}
		addr := "127.0.0.1:" + strconv.Itoa(p)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no loopback port free for TCP and UDP in %d-%d", portLo, portHi)
}

// StatusURL is d's status page (http://<health-addr>/status), or "-" when
// d serves no health-addr.
func StatusURL(d *daemon.Daemon) string {
	if d.HealthAddr == "" {
		return "-"
	}
	return "http://" + d.HealthAddr + "/status"
}

// Term is how a dev cluster writes a term: for people, then the integer
// fencing token for programs, each labelled.
func Term(t election.Term) string {
	return fmt.Sprintf("term %v, fencing token %d", t, uint64(t))
}

// exit ends d for good (electctl kill --exit in a dev cluster).
func (c *Cluster) exit(d *daemon.Daemon) {
	if d == nil {
		return
	}
	id := d.Config.ID
	c.mu.Lock()
	c.stopped[id] = true
	fmt.Fprintf(c.out, "%8.3fs node %d: stopping for good (electctl kill --exit); the other nodes go on\n", time.Since(c.start).Seconds(), id)
	c.mu.Unlock()
	err := d.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	at := time.Since(c.start).Seconds()
	if err != nil {
		fmt.Fprintf(c.out, "%8.3fs node %d: stopped: %v\n", at, id, err)
	} else {
		fmt.Fprintf(c.out, "%8.3fs node %d: stopped; its ports are closed\n", at, id)
	}
	c.checkAgreement(at)
}

// Stopped reports whether node id was ended by electctl kill --exit.
func (c *Cluster) Stopped(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped[id]
}

// watch prints d's leadership changes and whether the cluster agrees.
func (c *Cluster) watch(d *daemon.Daemon) {
	sub := d.Node.Subscribe()
	c.watchWG.Add(1)
	go func() {
		defer c.watchWG.Done()
		for li := range sub.C() {
			c.mu.Lock()
			c.views[d.Config.ID] = li
			at := time.Since(c.start).Seconds()
			if li.HasLeader() {
				fmt.Fprintf(c.out, "%8.3fs node %d: leader is node %d (%s; node %d is %s)\n", at, d.Config.ID, li.ID, Term(li.Term), d.Config.ID, li.State)
			} else {
				fmt.Fprintf(c.out, "%8.3fs node %d: no leader known (node %d is %s)\n", at, d.Config.ID, d.Config.ID, li.State)
			}
			c.checkAgreement(at)
			c.mu.Unlock()
		}
	}()
}

// checkAgreement prints, as they happen, that the live nodes agree on a
// leader, that two of them name different leaderships for longer than a
// normal change takes (a disagreement: which nodes see which leader), and
// the recovery from one. A node that knows no leader yet disagrees with
// nobody. Called with c.mu held.
func (c *Cluster) checkAgreement(at float64) {
	desc, first, n, all := c.survey()
	switch {
	case desc != "" && c.disagree != "":
		if desc != c.disagree {
			c.disagree = desc
			fmt.Fprintf(c.out, "%8.3fs !! the live nodes still disagree: %s\n", at, desc)
		}
	case desc != "":
		if !c.pending {
			// A leader is known a moment before its followers hear of it:
			// report only a disagreement that outlasts that.
			c.pending, c.disagreeSince = true, at
			time.AfterFunc(c.grace, c.recheck)
		}
	case all && n > 0:
		c.pending = false
		if c.disagree != "" {
			fmt.Fprintf(c.out, "%8.3fs ** recovered after %.3fs of disagreement: all %d live nodes agree: leader node %d, %s\n",
				at, at-c.disagreeSince, n, first.ID, Term(first.Term))
			c.disagree, c.agreed = "", first
			return
		}
		if first.ID != c.agreed.ID || first.Term != c.agreed.Term {
			c.agreed = first
			fmt.Fprintf(c.out, "%8.3fs ** all %d live nodes agree: leader node %d, %s\n", at, n, first.ID, Term(first.Term))
		}
	}
}

// recheck reports a disagreement still there a grace period after it began.
func (c *Cluster) recheck() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pending || c.disagree != "" || c.stopping {
		return
	}
	c.pending = false
	if desc, _, _, _ := c.survey(); desc != "" {
		c.disagree = desc
		fmt.Fprintf(c.out, "%8.3fs !! the live nodes disagree (since %.3fs): %s\n", time.Since(c.start).Seconds(), c.disagreeSince, desc)
	}
}

// survey reads the live nodes' views: a description of a disagreement
// ("" if at most one leadership is named), a leader view, how many live
// nodes know a leader, and whether every live node knows the same one.
func (c *Cluster) survey() (desc string, first node.LeaderInfo, n int, all bool) {
	type lead struct {
		id   election.NodeID
		term election.Term
	}
	leaders := map[lead][]uint64{}
	all = true
	for _, d := range c.Nodes {
		id := d.Config.ID
		if c.stopped[id] || d.Node.Status().Killed {
			continue
		}
		v := c.views[id]
		if !v.HasLeader() {
			all = false
			continue
		}
		leaders[lead{v.ID, v.Term}] = append(leaders[lead{v.ID, v.Term}], id)
		if n > 0 && (v.ID != first.ID || v.Term != first.Term) {
			all = false
		}
		first = v
		n++
	}
	if len(leaders) < 2 {
		return "", first, n, all
	}
	keys := make([]lead, 0, len(leaders))
	for k := range leaders {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b lead) int { return cmp.Compare(b.term, a.term) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("nodes %v see node %d leading (%s)", leaders[k], k.id, Term(k.term))
	}
	return strings.Join(parts, "; "), first, n, all
}

// stopAll stops the daemons together and waits for all of them.
func stopAll(ds []*daemon.Daemon) {
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Add(1)
		go func() { defer wg.Done(); d.Stop() }()
	}
	wg.Wait()
}

// goneWait bounds how long Stop waits for a leader to see the stopped
// followers leave gossip.
const goneWait = 2 * time.Second

// waitGone waits, at most wait, until d sees none of gone alive.
func waitGone(d *daemon.Daemon, gone []*daemon.Daemon, wait time.Duration) {
	ids := make(map[election.NodeID]bool, len(gone))
	for _, g := range gone {
		ids[election.NodeID(g.Config.ID)] = true
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		alive := false
		for _, m := range d.Node.Members() {
			alive = alive || (ids[m.ID] && m.Alive)
		}
		if !alive {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Stop stops every node and removes a temporary data directory: the
// followers together, then the leader (nobody is left to hand over to, so
// no election runs while the cluster goes away). A stopped follower's
// leave reaches the leader by gossip a moment after its Stop returns, so
// the leader is stopped only once it sees the followers gone (or after
// goneWait): until then it would hand over to a node that is no longer
// there, and warn that the handover was lost.
func (c *Cluster) Stop() {
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	var leaders, rest []*daemon.Daemon
	for _, d := range c.Nodes {
		if d.Node.Leader().Self {
			leaders = append(leaders, d)
		} else {
			rest = append(rest, d)
		}
	}
	stopAll(rest)
	for _, d := range leaders {
		waitGone(d, rest, goneWait)
	}
	stopAll(leaders)
	c.watchWG.Wait()
	if c.tmp != "" {
		os.RemoveAll(c.tmp)
	}
}
