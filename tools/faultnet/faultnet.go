// Package faultnet runs electord processes on a real network that it can
// cut: every node lives in its own Linux network namespace with its own
// address, plugged by a veth pair into a bridge in a hub namespace that the
// harness also creates. Links are cut with iptables rules inside the
// receiving node's namespace (packets dropped silently, as a real partition
// does); processes are killed, paused, stopped and restarted with signals.
//
// Nothing is created in the host's own namespace: the addresses
// (10.77.0.0/24) exist only inside the namespaces of one Cluster, the
// observer dials the nodes from the hub namespace (see Cluster.HTTPClient),
// and every rule lives in a namespace that Close deletes.
//
// Cleanup, in three layers:
//
//   - Close kills every process (SIGKILL, after SIGCONT) and deletes every
//     namespace it made; deleting a namespace removes its veths, bridge and
//     iptables rules with it. Defer it.
//   - CleanupOnSignal closes every open Cluster on SIGINT, SIGTERM or SIGHUP
//     and exits. Each electord is also started with a parent-death signal
//     (SIGKILL), so it does not outlive a harness that dies.
//   - Sweep removes what an earlier run that died without cleaning up left:
//     every namespace named with Prefix whose creating process is gone, and
//     the processes still inside it. New calls it.
//
// It needs root, iproute2 (ip) and iptables-restore: Available says whether
// this host has them.
package faultnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Prefix starts the name of every namespace faultnet makes:
// Prefix + "<pid>-<seq>-" + ["<tag>-"] + "hub" or "n<i>".
const Prefix = "efn-"

// Ports every node binds inside its own namespace (namespaces do not share
// ports, so every node uses the same ones).
const (
	APIPort    = 20070
	PeerPort   = 20071
	GossipPort = 20072
	HTTPPort   = 20073
)

// Subnet is the nodes' network, inside the cluster's namespaces only: node i
// is 10.77.0.i, the hub (the observer) 10.77.0.254.
const (
	subnetPrefix = "10.77.0."
	hubHost      = 254
	maxNodes     = 200
)

// Config describes a cluster.
type Config struct {
	Binary    string   // electord
	Nodes     int      // 1..200, or 0: the hub namespace alone, for a harness's own servers (Hub)
	Algorithm string   // ring or bully
	Quorum    int      // --quorum, 0 = off
	Args      []string // more electord flags, for every node
	// Tag, if set, goes into every namespace's (and Docker object's)
	// name after the pid and sequence, so that an operator can tell whose
	// run made them: 1 to 16 of a-z, 0-9. Uniqueness comes from the pid.
	Tag string
	// Dir holds the nodes' data dirs and logs; "" = a temporary directory,
	// removed by Close.
	Dir string
	// Docker runs every node as a container of a FROM scratch image
	// built around Binary (which must be static: CGO_ENABLED=0) on a
	// user-defined Docker network, instead of in network namespaces.
	Docker bool
	// OnChange is called (synchronously) after every change of the
	// network or of a process, with the new Topology.
	OnChange func(Topology)
	// Logf reports what the harness does; nil discards.
	Logf func(format string, a ...any)
}

// Topology is who is up and which links are cut at one moment.
type Topology struct {
	At time.Time
	// Up[i] is node i's process running and not paused (index 0 unused).
	Up []bool
	// Cut[from][to]: packets from node from to node to are dropped.
	Cut [][]bool
}

// State is a node process's state.
type State int

// Process states.
const (
	Down State = iota
	Running
	Paused
)

func (s State) String() string {
	return [...]string{"down", "running", "paused"}[s]
}

// Node is one electord process and its namespace.
type Node struct {
	ID   int
	NS   string // namespace name
	IP   string
	Args []string // electord's arguments
	// HTTPURL is the sidecar's base URL ("http://10.77.0.i:20073"),
	// reachable through Cluster.HTTPClient.
	HTTPURL string
	APIAddr string

	state  State
	proc   proc
	starts int
}

// proc is one run of a node's process.
type proc interface {
	// signal delivers sig (for a container: SIGSTOP and SIGCONT are
	// docker pause and unpause).
	signal(sig syscall.Signal) error
	exited() <-chan struct{}
	String() string
}

// driver is where the nodes run: network namespaces (nsDriver) or Docker
// containers (dockerDriver).
type driver interface {
	// setup makes the network; the nodes' addresses are set.
	setup(c *Cluster) error
	// dataDir is node nd's --data-dir as its process sees it.
	dataDir(c *Cluster, nd *Node) string
	// start starts nd's process, its output going to log.
	start(c *Cluster, nd *Node, log *os.File) (proc, error)
	// rules replaces the iptables filter table of nd's network.
	rules(nd *Node, rules string) error
	// dial dials a node's address from the observer's place.
	dial(ctx context.Context, network, addr string) (net.Conn, error)
	// teardown removes everything setup and start made (processes first).
	teardown(c *Cluster) error
}

// cmdProc is a process the harness started and waits for.
type cmdProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startCmd(cmd *exec.Cmd, log *os.File) (*cmdProc, error) {
	cmd.Stdout, cmd.Stderr = log, log
	// SIGKILL reaches the child if the harness dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &cmdProc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *cmdProc) signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }
func (p *cmdProc) exited() <-chan struct{}         { return p.done }
func (p *cmdProc) String() string {
	if st := p.cmd.ProcessState; st != nil {
		return fmt.Sprintf("pid %d, %v", p.cmd.Process.Pid, st)
	}
	return fmt.Sprintf("pid %d", p.cmd.Process.Pid)
}

// Cluster is a set of electord nodes on a network it can cut.
type Cluster struct {
	cfg   Config
	name  string // Prefix + pid + seq
	drv   driver
	dir   string
	tmp   bool
	Nodes []*Node // Nodes[i-1] is node i

	mu      sync.Mutex
	cut     [][]bool
	applied []string // per node: the iptables ruleset in force
	closed  bool
	client  *http.Client
}

var (
	seq  atomic.Int64
	live sync.Map // *Cluster -> struct{}
)

func (c *Cluster) logf(format string, a ...any) {
	if c.cfg.Logf != nil {
		c.cfg.Logf(format, a...)
	}
}

// Available says why this host cannot run a Cluster, or nil if it can: it
// needs root, ip and iptables-restore, and makes (and deletes) a probe
// namespace with a rule in it.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("faultnet needs root (network namespaces and iptables)")
	}
	for _, b := range []string{"ip", "iptables-restore"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("faultnet needs %s: %w", b, err)
		}
	}
	ns := fmt.Sprintf("%s%d-probe%d", Prefix, os.Getpid(), seq.Add(1))
	if err := run("ip", "netns", "add", ns); err != nil {
		return fmt.Errorf("network namespaces unavailable: %w", err)
	}
	defer run("ip", "netns", "del", ns)
	if err := restore(ns, ruleset(nil)); err != nil {
		return fmt.Errorf("iptables in a network namespace unavailable: %w", err)
	}
	return nil
}

// run runs a command and returns its error with its output.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// New makes the namespaces, the bridge and the veths, and starts every node.
// It sweeps leftovers of dead earlier runs first. Close it.
func New(cfg Config) (c *Cluster, err error) {
	if cfg.Nodes < 0 || cfg.Nodes > maxNodes {
		return nil, fmt.Errorf("faultnet: %d nodes (0..%d)", cfg.Nodes, maxNodes)
	}
	if cfg.Nodes == 0 && cfg.Docker {
		return nil, errors.New("faultnet: 0 nodes (the hub alone) needs network namespaces, not Docker")
	}
	if !validTag(cfg.Tag) {
		return nil, fmt.Errorf("faultnet: tag %q: want at most 16 of a-z and 0-9", cfg.Tag)
	}
	Sweep(cfg.Logf)
	c = &Cluster{cfg: cfg, name: fmt.Sprintf("%s%d-%d-", Prefix, os.Getpid(), seq.Add(1))}
	if cfg.Tag != "" {
		c.name += cfg.Tag + "-"
	}
	if cfg.Docker {
		c.drv = &dockerDriver{}
	} else {
		c.drv = &nsDriver{hubFD: -1}
	}
	c.dir = cfg.Dir
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "faultnet-"); err != nil {
			return nil, err
		}
		c.tmp = true
	}
	live.Store(c, struct{}{})
	made := c // a failing return sets c to nil
	defer func() {
		if err != nil {
			made.Close()
			c = nil
		}
	}()
	n := cfg.Nodes
	c.cut = make([][]bool, n+1)
	for i := range c.cut {
		c.cut[i] = make([]bool, n+1)
	}
	c.applied = make([]string, n+1)
	for i := 1; i <= n; i++ {
		c.Nodes = append(c.Nodes, &Node{ID: i})
	}
	if err := c.drv.setup(c); err != nil {
		return nil, fmt.Errorf("faultnet: %w", err)
	}
	for _, nd := range c.Nodes {
		nd.HTTPURL = fmt.Sprintf("http://%s:%d", nd.IP, HTTPPort)
		nd.APIAddr = fmt.Sprintf("%s:%d", nd.IP, APIPort)
	}
	c.client = &http.Client{Transport: &http.Transport{
		DialContext:         c.DialContext,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}}
	var seeds []string
	for _, nd := range c.Nodes {
		seeds = append(seeds, fmt.Sprintf("%s:%d", nd.IP, GossipPort))
	}
	for _, nd := range c.Nodes {
		nd.Args = []string{
			"--id", strconv.Itoa(nd.ID), "--algorithm", cfg.Algorithm,
			"--api-addr", nd.APIAddr,
			"--peer-addr", fmt.Sprintf("%s:%d", nd.IP, PeerPort),
			"--gossip-addr", fmt.Sprintf("%s:%d", nd.IP, GossipPort),
			"--http-addr", fmt.Sprintf("%s:%d", nd.IP, HTTPPort),
			"--data-dir", c.drv.dataDir(c, nd),
			"--bootstrap-expect", strconv.Itoa(n),
			"--join", strings.Join(slices.Delete(slices.Clone(seeds), nd.ID-1, nd.ID), ","),
			"--log-level", "info",
			// The nodes bind addresses that are not loopback, which needs
			// TLS material and a gossip key or this flag (docs/SECURITY.md):
			// the harness tests faults, not authentication.
			"--insecure",
		}
		if cfg.Quorum > 0 {
			nd.Args = append(nd.Args, "--quorum", strconv.Itoa(cfg.Quorum))
		}
		nd.Args = append(nd.Args, cfg.Args...)
	}
	for _, nd := range c.Nodes {
		if err := c.start(nd); err != nil {
			return nil, err
		}
	}
	c.changed()
	return c, nil
}

// validTag says whether tag may go into a namespace or container name.
func validTag(tag string) bool {
	if len(tag) > 16 {
		return false
	}
	for _, r := range tag {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// nsDriver runs every node in its own network namespace, plugged into a
// bridge in a hub namespace (the observer's place).
type nsDriver struct {
	hub   string
	hubFD int
}

func (d *nsDriver) setup(c *Cluster) error {
	d.hub = c.name + "hub"
	cmds := [][]string{
		{"netns", "add", d.hub},
		{"-n", d.hub, "link", "set", "lo", "up"},
		{"-n", d.hub, "link", "add", "br0", "type", "bridge"},
		{"-n", d.hub, "addr", "add", ip(hubHost) + "/24", "dev", "br0"},
		{"-n", d.hub, "link", "set", "br0", "up"},
	}
	for _, nd := range c.Nodes {
		nd.NS, nd.IP = c.name+"n"+strconv.Itoa(nd.ID), ip(nd.ID)
		v := "v" + strconv.Itoa(nd.ID)
		cmds = append(cmds,
			[]string{"netns", "add", nd.NS},
			[]string{"-n", nd.NS, "link", "set", "lo", "up"},
			[]string{"-n", d.hub, "link", "add", v, "type", "veth", "peer", "name", "eth0", "netns", nd.NS},
			[]string{"-n", d.hub, "link", "set", v, "master", "br0", "up"},
			[]string{"-n", nd.NS, "addr", "add", nd.IP + "/24", "dev", "eth0"},
			[]string{"-n", nd.NS, "link", "set", "eth0", "up"},
		)
	}
	for _, a := range cmds {
		if err := run("ip", a...); err != nil {
			return err
		}
	}
	var err error
	if d.hubFD, err = unix.Open("/run/netns/"+d.hub, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		return fmt.Errorf("opening the hub namespace: %w", err)
	}
	return nil
}

func (d *nsDriver) dataDir(c *Cluster, nd *Node) string {
	return filepath.Join(c.dir, "node-"+strconv.Itoa(nd.ID))
}

func (d *nsDriver) start(c *Cluster, nd *Node, log *os.File) (proc, error) {
	// ip execs electord in place: the pid is electord's.
	return startCmd(exec.Command("ip", append([]string{"netns", "exec", nd.NS, c.cfg.Binary}, nd.Args...)...), log)
}

func (d *nsDriver) rules(nd *Node, rules string) error { return restore(nd.NS, rules) }

func (d *nsDriver) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialIn(ctx, d.hubFD, network, addr)
}

func (d *nsDriver) teardown(c *Cluster) error {
	if d.hubFD >= 0 {
		unix.Close(d.hubFD)
		d.hubFD = -1
	}
	var errs []error
	for _, nd := range c.Nodes {
		if nd.NS != "" {
			errs = append(errs, deleteNS(nd.NS))
		}
	}
	if d.hub != "" {
		errs = append(errs, deleteNS(d.hub))
	}
	return errors.Join(errs...)
}

func ip(host int) string { return subnetPrefix + strconv.Itoa(host) }

// Dir is where the nodes' data dirs and logs (node-<i>.log) are.
func (c *Cluster) Dir() string { return c.dir }

// Hub is the hub namespace's name (network namespaces only; "" with
// Docker): the observer's place, which no rule cuts, where a harness runs
// what every node must reach (ip netns exec HUB ...).
func (c *Cluster) Hub() string {
	if d, ok := c.drv.(*nsDriver); ok {
		return d.hub
	}
	return ""
}

// Node returns node i (1-based).
func (c *Cluster) Node(i int) *Node { return c.Nodes[i-1] }

// HTTPClient returns a client that reaches the nodes' addresses: it dials
// from the hub namespace. Its requests need their own timeouts.
func (c *Cluster) HTTPClient() *http.Client { return c.client }

// DialContext dials addr from the observer's place, which no rule ever
// cuts: the hub namespace (or, with Docker, the host).
func (c *Cluster) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return c.drv.dial(ctx, network, addr)
}

// DialFrom dials addr from inside node i's namespace, as node i would: the
// rules that cut node i's links apply. Namespaces only (not Docker).
func (c *Cluster) DialFrom(ctx context.Context, i int, network, addr string) (net.Conn, error) {
	if c.Node(i).NS == "" {
		return nil, errors.New("faultnet: DialFrom needs network namespaces")
	}
	fd, err := unix.Open("/run/netns/"+c.Node(i).NS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return dialIn(ctx, fd, network, addr)
}

// dialIn dials addr from inside the namespace nsFD. The socket is made on a
// goroutine locked to an OS thread that joins the namespace for the dial
// and leaves it after; a socket keeps the namespace it was made in. If the
// thread cannot go back, it stays locked and ends with its goroutine.
func dialIn(ctx context.Context, nsFD int, network, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(nsFD, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("setns: %w", err)}
			return
		}
		var d net.Dialer
		if network == "tcp" {
			network = "tcp4"
		}
		conn, err := d.DialContext(ctx, network, addr)
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			ch <- result{conn, err} // the thread stays locked: it exits with this goroutine
			return
		}
		runtime.UnlockOSThread()
		ch <- result{conn, err}
	}()
	r := <-ch
	return r.conn, r.err
}

// start starts nd's process in its namespace.
func (c *Cluster) start(nd *Node) error {
	if nd.state != Down {
		return fmt.Errorf("faultnet: node %d is %s", nd.ID, nd.state)
	}
	logFile, err := os.OpenFile(filepath.Join(c.dir, fmt.Sprintf("node-%d.log", nd.ID)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logFile, "=== faultnet: start %d at %s\n", nd.starts+1, time.Now().UTC().Format(time.RFC3339Nano))
	p, err := c.drv.start(c, nd, logFile)
	logFile.Close() // the process has its own descriptor
	if err != nil {
		return fmt.Errorf("faultnet: starting node %d: %w", nd.ID, err)
	}
	nd.proc, nd.state = p, Running
	nd.starts++
	c.logf("node %d: started (%v)", nd.ID, p)
	// A container's network is new at every start: put its rules back.
	if rs := c.applied[nd.ID]; c.cfg.Docker && rs != "" {
		if err := c.drv.rules(nd, rs); err != nil {
			return err
		}
	}
	return nil
}

// State is node i's process state.
func (c *Cluster) State(i int) State {
	c.mu.Lock()
	defer c.mu.Unlock()
	nd := c.Node(i)
	c.reap(nd)
	return nd.state
}

// reap notices a process that exited by itself. c.mu held.
func (c *Cluster) reap(nd *Node) {
	if nd.state == Down {
		return
	}
	select {
	case <-nd.proc.exited():
		c.logf("node %d: exited by itself (%v)", nd.ID, nd.proc)
		nd.state = Down
	default:
	}
}

// Start restarts node i (down) with the same arguments and data dir.
func (c *Cluster) Start(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	nd := c.Node(i)
	c.reap(nd)
	if err := c.start(nd); err != nil {
		return err
	}
	c.changedLocked()
	return nil
}

// Kill SIGKILLs node i and waits for it to exit.
func (c *Cluster) Kill(i int) error { return c.stop(i, syscall.SIGKILL, 0) }

// Term SIGTERMs node i and waits up to timeout for it to exit, then
// SIGKILLs it; it returns an error if SIGKILL was needed.
func (c *Cluster) Term(i int, timeout time.Duration) error {
	return c.stop(i, syscall.SIGTERM, timeout)
}

func (c *Cluster) stop(i int, sig syscall.Signal, timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	nd := c.Node(i)
	c.reap(nd)
	if nd.state == Down {
		return fmt.Errorf("faultnet: node %d is down", i)
	}
	if nd.state == Paused {
		nd.proc.signal(syscall.SIGCONT)
	}
	nd.proc.signal(sig)
	var err error
	if sig != syscall.SIGKILL {
		select {
		case <-nd.proc.exited():
		case <-time.After(timeout):
			err = fmt.Errorf("faultnet: node %d did not exit within %v of %v", i, timeout, sig)
			nd.proc.signal(syscall.SIGKILL)
		}
	}
	<-nd.proc.exited()
	nd.state = Down
	c.logf("node %d: %v, exited", i, sig)
	c.changedLocked()
	return err
}

// Pause SIGSTOPs node i.
func (c *Cluster) Pause(i int) error { return c.signal(i, syscall.SIGSTOP, Running, Paused) }

// Resume SIGCONTs node i.
func (c *Cluster) Resume(i int) error { return c.signal(i, syscall.SIGCONT, Paused, Running) }

func (c *Cluster) signal(i int, sig syscall.Signal, from, to State) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	nd := c.Node(i)
	c.reap(nd)
	if nd.state != from {
		return fmt.Errorf("faultnet: node %d is %s, not %s", i, nd.state, from)
	}
	if err := nd.proc.signal(sig); err != nil {
		return err
	}
	nd.state = to
	c.logf("node %d: %v", i, sig)
	c.changedLocked()
	return nil
}

// Cut drops every packet from node from to node to (one way).
func (c *Cluster) Cut(from, to int) error {
	return c.Links(func(cut [][]bool) { cut[from][to] = true })
}

// Links changes the cut matrix with edit (cut[from][to] true = dropped)
// and applies the new rules in every namespace whose rules changed, in
// parallel. Links it heals are reported healed as it starts (OnChange: a
// topology in which only the links cut both before and after are cut), and
// links it cuts are reported cut once every rule is in force: so the
// history never counts a node as cut off while its rules are being
// removed (on a loaded host that took up to 2 s and looked like a minority
// naming a leader) nor as cut before it is.
func (c *Cluster) Links(edit func(cut [][]bool)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := make([][]bool, len(c.cut))
	for i := range c.cut {
		old[i] = slices.Clone(c.cut[i])
	}
	edit(c.cut)
	for i := range c.cut {
		c.cut[i][i] = false
	}
	healing, cutting := false, false
	both := make([][]bool, len(c.cut))
	for i := range c.cut {
		both[i] = make([]bool, len(c.cut[i]))
		for j := range c.cut[i] {
			both[i][j] = old[i][j] && c.cut[i][j]
			healing = healing || (old[i][j] && !c.cut[i][j])
			cutting = cutting || (!old[i][j] && c.cut[i][j])
		}
	}
	if healing && c.cfg.OnChange != nil {
		t := c.topologyLocked()
		t.Cut = both
		c.cfg.OnChange(t)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(c.Nodes)+1)
	for _, nd := range c.Nodes {
		var from []string
		for j := 1; j <= len(c.Nodes); j++ {
			if c.cut[j][nd.ID] {
				from = append(from, ip(j))
			}
		}
		rs := ruleset(from)
		if rs == c.applied[nd.ID] {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if nd.state == Down && c.cfg.Docker {
				c.applied[nd.ID] = rs // applied when it starts
				return
			}
			if errs[nd.ID] = c.drv.rules(nd, rs); errs[nd.ID] == nil {
				c.applied[nd.ID] = rs
			}
		}()
	}
	wg.Wait()
	if cutting || !healing {
		c.changedLocked()
	}
	return errors.Join(errs...)
}

// Partition cuts every link between nodes of different groups, both ways,
// and heals every other link. Nodes in no group are cut from everyone.
func (c *Cluster) Partition(groups ...[]int) error {
	side := map[int]int{}
	for g, ids := range groups {
		for _, id := range ids {
			side[id] = g + 1
		}
	}
	return c.Links(func(cut [][]bool) {
		for a := 1; a < len(cut); a++ {
			for b := 1; b < len(cut); b++ {
				cut[a][b] = side[a] == 0 || side[b] == 0 || side[a] != side[b]
			}
		}
	})
}

// Isolate cuts node i from every other node, both ways (other links keep
// their state).
func (c *Cluster) Isolate(i int) error {
	return c.Links(func(cut [][]bool) {
		for j := 1; j < len(cut); j++ {
			cut[i][j], cut[j][i] = true, true
		}
	})
}

// Heal restores every link.
func (c *Cluster) Heal() error {
	return c.Links(func(cut [][]bool) {
		for a := range cut {
			clear(cut[a])
		}
	})
}

// ruleset is the iptables-restore input that drops packets from the
// addresses from.
func ruleset(from []string) string {
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for _, a := range from {
		fmt.Fprintf(&b, "-A INPUT -s %s/32 -j DROP\n", a)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// restore replaces the filter table of namespace ns.
func restore(ns, rules string) error {
	cmd := exec.Command("ip", "netns", "exec", ns, "iptables-restore")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore in %s: %v: %s", ns, err, bytes.TrimSpace(out))
	}
	return nil
}

// Topology returns who is up and what is cut now.
func (c *Cluster) Topology() Topology {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topologyLocked()
}

func (c *Cluster) topologyLocked() Topology {
	t := Topology{At: time.Now(), Up: make([]bool, len(c.Nodes)+1), Cut: make([][]bool, len(c.cut))}
	for _, nd := range c.Nodes {
		c.reap(nd)
		t.Up[nd.ID] = nd.state == Running
	}
	for i := range c.cut {
		t.Cut[i] = slices.Clone(c.cut[i])
	}
	return t
}

func (c *Cluster) changed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changedLocked()
}

func (c *Cluster) changedLocked() {
	if c.cfg.OnChange != nil {
		c.cfg.OnChange(c.topologyLocked())
	}
}

// Close kills every node and deletes every namespace (with their veths,
// bridge and rules), and the directory if New made it. It is safe to call
// more than once and from a signal handler's goroutine.
func (c *Cluster) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	live.Delete(c)
	for _, nd := range c.Nodes {
		if nd.state != Down && nd.proc != nil {
			nd.proc.signal(syscall.SIGCONT)
			nd.proc.signal(syscall.SIGKILL)
			select {
			case <-nd.proc.exited():
			case <-time.After(5 * time.Second):
			}
			nd.state = Down
		}
	}
	if c.client != nil {
		c.client.CloseIdleConnections()
	}
	err := c.drv.teardown(c)
	if c.tmp {
		os.RemoveAll(c.dir)
	}
	return err
}

// deleteNS kills whatever still runs in namespace ns and deletes it; a
// namespace that does not exist is no error.
func deleteNS(ns string) error {
	if _, err := os.Stat("/run/netns/" + ns); err != nil {
		return nil
	}
	if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGCONT)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	return run("ip", "netns", "del", ns)
}

// Sweep deletes the namespaces (and kills the processes in them) that a
// faultnet run left behind: those named with Prefix whose creating process
// no longer exists. It reports each removal through logf (nil: silent).
func Sweep(logf func(string, ...any)) {
	sweepDocker(logf)
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], Prefix) {
			continue
		}
		name := f[0]
		if !stale(name) {
			continue // its creator still runs
		}
		err := deleteNS(name)
		if logf != nil {
			logf("faultnet: swept leftover namespace %s (%v)", name, err)
		}
	}
}

// stale says whether name (Prefix + pid + ...) was made by a process that
// no longer exists.
func stale(name string) bool {
	pidStr, _, _ := strings.Cut(strings.TrimPrefix(name, Prefix), "-")
	pid, err := strconv.Atoi(pidStr)
	return err != nil || pid <= 0 || (pid != os.Getpid() && syscall.Kill(pid, 0) != nil)
}

// CleanupOnSignal closes every open Cluster when the process gets SIGINT,
// SIGTERM or SIGHUP, then exits with status 1. Call the returned function
// to stop listening.
func CleanupOnSignal() (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			fmt.Fprintf(os.Stderr, "faultnet: %v: cleaning up\n", s)
			CloseAll()
			os.Exit(1)
		case <-done:
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
		})
	}
}

// CloseAll closes every Cluster not closed yet.
func CloseAll() {
	live.Range(func(k, _ any) bool {
		k.(*Cluster).Close()
		return true
	})
}
