package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/electord/electord/proto/electord/v1"
)

// proc is one electord process of the benchmark cluster.
type proc struct {
	id          uint64
	args        []string
	api         string
	cmd         *exec.Cmd
	exited      chan struct{}
	conn        *grpc.ClientConn
	client      pb.ElectorClient
	mu          sync.Mutex
	view        *pb.LeaderInfo // latest watch event
	viewAt      time.Time
	changes     int // leader or term changes seen by this node's watch
	running     bool
	watchCancel context.CancelFunc
	stopWatch   chan struct{}
}

type cluster struct {
	bin   string
	dir   string
	pki   *pki // --secure
	procs []*proc
	logf  func(string, ...any)

	mu sync.Mutex
	// firstStart is when the first process of the cluster started, and
	// allStarted when startCluster had started them all.
	firstStart, allStarted time.Time
}

// Ports. electbench used to ask the kernel for a free port (listen on port 0,
// close, pass the number on). Such a port comes from the ephemeral range, the
// same range outgoing connections draw from, so while a killed node was down
// one of the survivors' connections could take its port and the node could not
// come back (it happened once in issue 3: "the electbench port race").
//
// Now every port comes from portLo..portHi-1, below Linux's ephemeral range
// (32768–60999 by default; checkPortRange warns if this host's overlaps). A
// port is handed out only if it is free for both TCP and UDP (gossip listens
// on both), and never twice in one electbench process, so consecutive
// clusters (algorithms, binaries, rounds) never meet a previous cluster's
// sockets. The walk starts at a random port, so two electbench processes at
// once are unlikely to meet either.
const portLo, portHi = 20000, 30000

var ports struct {
	sync.Mutex
	next    int
	checked bool
}

func freePort() (int, error) {
	ports.Lock()
	defer ports.Unlock()
	if !ports.checked {
		ports.checked = true
		checkPortRange()
	}
	if ports.next == 0 {
		ports.next = portLo + rand.IntN(portHi-portLo)
	}
	for range portHi - portLo {
		p := ports.next
		if ports.next++; ports.next == portHi {
			ports.next = portLo
		}
		if portFree(p) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port in %d–%d", portLo, portHi-1)
}

// portFree says whether 127.0.0.1:p can be bound now, for TCP and for UDP.
func portFree(p int) bool {
	addr := fmt.Sprintf("127.0.0.1:%d", p)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	u.Close()
	return true
}

// checkPortRange warns when the host's ephemeral ports overlap electbench's.
func checkPortRange() {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return
	}
	var lo, hi int
	if n, _ := fmt.Sscan(string(b), &lo, &hi); n == 2 && lo < portHi && hi >= portLo {
		fmt.Fprintf(os.Stderr, "electbench: warning: the ephemeral port range %d–%d overlaps electbench's %d–%d; a restarted node may find its port taken\n", lo, hi, portLo, portHi-1)
	}
}

// startCluster starts n electord processes with the default configuration,
// on free loopback ports (see freePort), all joining node 1.
func startCluster(bin, algo string, n int, extra []string, logf func(string, ...any)) (*cluster, error) {
	return startClusterWith(bin, algo, n, extra, nil, logf)
}

// startClusterWith is startCluster with perNode's flags, if set, added to
// node id's after extra.
func startClusterWith(bin, algo string, n int, extra []string, perNode func(id int) []string, logf func(string, ...any)) (*cluster, error) {
	dir, err := os.MkdirTemp("", "electbench-")
	if err != nil {
		return nil, err
	}
	c := &cluster{bin: bin, dir: dir, logf: logf}
	creds := insecure.NewCredentials()
	if secure {
		if c.pki, err = newPKI(dir); err != nil {
			return nil, err
		}
		creds = c.pki.creds()
	}
	var seed string
	for i := 1; i <= n; i++ {
		var ports [4]int
		for k := range ports {
			if ports[k], err = freePort(); err != nil {
				return nil, err
			}
		}
		p := &proc{id: uint64(i), api: fmt.Sprintf("127.0.0.1:%d", ports[0])}
		p.args = []string{
			"--id", strconv.Itoa(i), "--algorithm", algo,
			"--api-addr", p.api,
			"--peer-addr", fmt.Sprintf("127.0.0.1:%d", ports[1]),
			"--gossip-addr", fmt.Sprintf("127.0.0.1:%d", ports[2]),
			"--http-addr", fmt.Sprintf("127.0.0.1:%d", ports[3]),
			"--data-dir", filepath.Join(dir, "node-"+strconv.Itoa(i)),
			"--log-level", "warn",
		}
		if seed != "" {
			p.args = append(p.args, "--join", seed)
		} else {
			seed = fmt.Sprintf("127.0.0.1:%d", ports[2])
		}
		if c.pki != nil {
			sec, err := c.pki.nodeArgs(i)
			if err != nil {
				c.stop()
				return nil, err
			}
			p.args = append(p.args, sec...)
		}
		p.args = append(p.args, extra...)
		if perNode != nil {
			p.args = append(p.args, perNode(i)...)
		}
		if p.conn, err = grpc.NewClient(p.api, grpc.WithTransportCredentials(creds)); err != nil {
			return nil, err
		}
		p.client = pb.NewElectorClient(p.conn)
		c.procs = append(c.procs, p)
	}
	// Everything above (ports, clients) is the benchmark's own setup: the
	// processes start only now, startWorkers at a time, node 1 (the seed)
	// first. One after another, each start waited for the last process's
	// exec, which on a host the started nodes keep busy took up to 70 ms:
	// seconds at 128 nodes that no cluster spends.
	if err := c.start(c.procs[0]); err != nil {
		c.stop()
		return nil, err
	}
	work := make(chan *proc)
	errs := make(chan error, startWorkers)
	var wg sync.WaitGroup
	for range startWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				if err := c.start(p); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var startErr error
feed:
	for _, p := range c.procs[1:] {
		select {
		case work <- p:
		case startErr = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	if startErr == nil && len(errs) > 0 {
		startErr = <-errs
	}
	if startErr != nil {
		c.stop()
		return nil, startErr
	}
	c.mu.Lock()
	c.allStarted = time.Now()
	c.mu.Unlock()
	return c, nil
}

// startWorkers is how many processes startCluster starts at once.
const startWorkers = 8

func (c *cluster) start(p *proc) error {
	p.cmd = exec.Command(c.bin, p.args...)
	if addr := pprofAddr(p.id); addr != "" {
		p.cmd.Env = append(os.Environ(), "ELECTORD_PPROF_DEBUG_ADDR="+addr)
	}
	logFile, err := os.OpenFile(filepath.Join(c.dir, fmt.Sprintf("node-%d.log", p.id)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	t := time.Now()
	if err := p.cmd.Start(); err != nil {
		return err
	}
	c.mu.Lock()
	if c.firstStart.IsZero() {
		c.firstStart = t
	}
	c.mu.Unlock()
	p.exited = make(chan struct{})
	go func() { p.cmd.Wait(); logFile.Close(); close(p.exited) }()
	p.mu.Lock()
	p.running, p.view = true, nil
	p.mu.Unlock()
	c.watch(p)
	return nil
}

// watch follows p's WatchLeader stream, reconnecting while p runs.
func (c *cluster) watch(p *proc) {
	ctx, cancel := context.WithCancel(context.Background())
	p.watchCancel = cancel
	go func() {
		for ctx.Err() == nil {
			stream, err := p.client.WatchLeader(ctx, &pb.WatchLeaderRequest{})
			if err == nil {
				for {
					ev, err := stream.Recv()
					if err != nil {
						break
					}
					now := time.Now()
					p.mu.Lock()
					if p.view != nil && (p.view.Id != ev.Leader.Id || p.view.Term != ev.Leader.Term) {
						p.changes++
					}
					p.view, p.viewAt = ev.Leader, now
					p.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
}

func (c *cluster) kill(p *proc) {
	p.watchCancel()
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	p.mu.Lock()
	p.running, p.view = false, nil
	p.mu.Unlock()
}

func (c *cluster) stop() {
	for _, p := range c.procs {
		if p.cmd != nil && p.cmd.Process != nil {
			p.watchCancel()
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range c.procs {
		if p.cmd != nil && p.exited != nil {
			select {
			case <-p.exited:
			case <-time.After(5 * time.Second):
				p.cmd.Process.Kill()
				<-p.exited
			}
		}
		if p.conn != nil {
			p.conn.Close()
		}
	}
	c.pki.close()
	// ELECTBENCH_KEEP=1 keeps the nodes' data dirs and logs (and, with
	// --secure, the certificates) for a look afterwards.
	if os.Getenv("ELECTBENCH_KEEP") == "" {
		os.RemoveAll(c.dir)
	} else {
		fmt.Fprintln(os.Stderr, "kept", c.dir)
	}
}

// agreed returns the leader every running node reports, and the latest time
// one of them reported it, if they all agree on one that satisfies ok.
func (c *cluster) agreed(ok func(*pb.LeaderInfo) bool) (*pb.LeaderInfo, time.Time, bool) {
	var first *pb.LeaderInfo
	var last time.Time
	for _, p := range c.procs {
		p.mu.Lock()
		running, v, at := p.running, p.view, p.viewAt
		p.mu.Unlock()
		if !running {
			continue
		}
		if v == nil || v.Id == 0 || (first != nil && (v.Id != first.Id || v.Term != first.Term)) || !ok(v) {
			return nil, time.Time{}, false
		}
		first = v
		if at.After(last) {
			last = at
		}
	}
	return first, last, first != nil
}

// waitAgreed polls (every millisecond) until the running nodes agree.
func (c *cluster) waitAgreed(timeout time.Duration, ok func(*pb.LeaderInfo) bool) (*pb.LeaderInfo, time.Time, error) {
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		if li, at, good := c.agreed(ok); good {
			return li, at, nil
		}
		time.Sleep(time.Millisecond)
	}
	var views []string
	for _, p := range c.procs {
		p.mu.Lock()
		views = append(views, fmt.Sprintf("%d:%v", p.id, p.view))
		if p.running && p.view == nil {
			// Say why a node never reported: the tail of its log.
			if b, err := os.ReadFile(filepath.Join(c.dir, fmt.Sprintf("node-%d.log", p.id))); err == nil {
				c.logf("node %d reported nothing; its log ends with:\n%s", p.id, tail(string(b), 2000))
			}
		}
		p.mu.Unlock()
	}
	return nil, time.Time{}, fmt.Errorf("no agreement within %v: %v", timeout, views)
}

func (c *cluster) proc(id uint64) *proc { return c.procs[id-1] }

// isRunning says whether p was started and not killed since.
func (p *proc) isRunning() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running
}

func anyLeader(*pb.LeaderInfo) bool { return true }

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
