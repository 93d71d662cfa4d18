package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/electord/electord/client"
	"github.com/electord/electord/config"
	pb "github.com/electord/electord/proto/electord/v1"
)

// The promise a quorum leader's watchers are held to: a watcher never holds
// "self" longer than /leader/self on the same node would, give or take
// leaseWatchTick plus leaseWatchSlack.
const (
	// leaseWatchTick is the bound the feature promises: one tick of the
	// node's clock (the default tick, which these processes run), the
	// granularity at which the node itself tracks its lease.
	leaseWatchTick = config.DefaultTick
	// leaseWatchSlack is what the test allows on top for its own process:
	// after SIGCONT the /leader/self poller, the SSE reader and the gRPC
	// stream's reader are three goroutines of the test process (which
	// runs the node's three other processes' peers too) that must each
	// get a core of a shared two-core machine before they note the time
	// of what they read. 15 ms is one and a half of Linux's default
	// scheduling latency (CFS sched_latency 6 ms x 2 cores, rounded up),
	// far below the pause itself (at least a lease, 450 ms).
	leaseWatchSlack = 15 * time.Millisecond
)

// reading is something a watcher or poller read, with the time it read it.
type reading struct {
	at    time.Time
	li    client.LeaderInfo
	code  int    // the /leader/self poller: the HTTP status
	err   error  // a broken stream or failed request
	event string // SSE: the event name
}

// stampLog is an append-only list of readings, safe for concurrent
// use; waiters are woken on every append.
type stampLog struct {
	mu    sync.Mutex
	items []reading
	bump  chan struct{} // closed and replaced on every append
}

func newStampLog() *stampLog { return &stampLog{bump: make(chan struct{})} }

func (l *stampLog) add(s reading) {
	l.mu.Lock()
	l.items = append(l.items, s)
	close(l.bump)
	l.bump = make(chan struct{})
	l.mu.Unlock()
}

// wait returns the first item after index from (its index too) that pred
// accepts, waiting for one until timeout.
func (l *stampLog) wait(from int, timeout time.Duration, pred func(reading) bool) (reading, int, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for i := from; ; {
		l.mu.Lock()
		for ; i < len(l.items); i++ {
			if pred(l.items[i]) {
				s := l.items[i]
				l.mu.Unlock()
				return s, i, true
			}
		}
		bump := l.bump
		l.mu.Unlock()
		select {
		case <-bump:
		case <-deadline.C:
			return reading{}, 0, false
		}
	}
}

func (l *stampLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.items)
}

func (l *stampLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, s := range l.items {
		fmt.Fprintf(&b, "  %s", s.at.Format("15:04:05.000000"))
		switch {
		case s.err != nil:
			fmt.Fprintf(&b, " error %v", s.err)
		case s.code != 0:
			fmt.Fprintf(&b, " HTTP %d self=%v state=%s term=%v", s.code, s.li.Self, s.li.State, s.li.Term)
		default:
			fmt.Fprintf(&b, " leader %d term %v state %s self=%v", s.li.ID, s.li.Term, s.li.State, s.li.Self)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// watchSSE reads GET /watch on httpAddr until ctx ends, stamping each
// leader event.
func watchSSE(ctx context.Context, t *testing.T, httpAddr string) *stampLog {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/watch", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /watch on %s: %v", httpAddr, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("GET /watch on %s: %d", httpAddr, resp.StatusCode)
	}
	log := newStampLog()
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var event, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			case line == "" && event != "":
				s := reading{at: time.Now(), event: event}
				s.err = json.Unmarshal([]byte(data), &s.li)
				log.add(s)
				event, data = "", ""
			}
		}
		if ctx.Err() == nil {
			log.add(reading{at: time.Now(), err: fmt.Errorf("the /watch stream ended: %v", sc.Err())})
		}
	}()
	return log
}

// watchClient reads a client.Watch of the single endpoint api until ctx
// ends, stamping each event.
func watchClient(ctx context.Context, t *testing.T, api string) *stampLog {
	log := newStampLog()
	ch := newClient(t, api).Watch(ctx)
	go func() {
		for ev := range ch {
			log.add(reading{at: time.Now(), li: ev.Leader, err: ev.Err})
		}
	}()
	return log
}

// pollSelf asks GET /leader/self on httpAddr back to back until ctx ends,
// stamping each answer when it arrives. A request to a stopped process
// waits for it, so the first answer after SIGCONT is reading as soon as the
// process answers it.
func pollSelf(ctx context.Context, httpAddr string) *stampLog {
	log := newStampLog()
	hc := &http.Client{Timeout: time.Minute}
	go func() {
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/leader/self", nil)
			resp, err := hc.Do(req)
			if err != nil {
				if ctx.Err() == nil {
					log.add(reading{at: time.Now(), err: err})
				}
				continue
			}
			s := reading{at: time.Now(), code: resp.StatusCode}
			s.err = json.NewDecoder(resp.Body).Decode(&s.li)
			resp.Body.Close()
			log.add(s)
		}
	}()
	return log
}

// TestQuorumWatchSeesAPausedLeadersLapse: a quorum leader's process is
// paused (SIGSTOP) until the other two have elected a new leader, which
// they can only do after its lease ran out, then resumed. Its watchers (an
// SSE client on its sidecar, and a client.Watch of its gRPC API) see it
// stop claiming within a tick of when its own /leader/self first answers
// not-leader, and nothing on them claims its old leadership after that;
// the watchers of the other two see the new leader.
func TestQuorumWatchSeesAPausedLeadersLapse(t *testing.T) {
	for _, alg := range algorithms {
		t.Run(alg, func(t *testing.T) { testPausedLeaderLapse(t, alg) })
	}
}

func testPausedLeaderLapse(t *testing.T, alg string) {
	ps := startProcsWith(t, 3, alg, []string{"--quorum", "3"})
	l0 := waitProcAgreement(t, ps, 15*time.Second, "three quorum processes agree on a leader", nil)
	leader := procByID(ps, l0.ID)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newLapseWatch(ctx, t, ps, leader, l0)

	pid := leader.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("SIGCONT to node %d: %v", l0.ID, err)
			}
		}
	}
	defer resume()
	// Paused past its lease: the other two elect a new leader only after
	// every promise to the paused one ended, which is after its lease did.
	l1 := waitProcAgreement(t, w.others, 10*time.Second, "the other two agree on a new leader", func(li client.LeaderInfo) bool {
		return li.ID != l0.ID && li.Term > l0.Term
	})
	resume()
	resumedAt := time.Now()
	notSelf := w.leaderSaysNotSelf(5 * time.Second)
	t.Logf("node %d paused for %v; nodes %d and %d elected node %d in term %v; /leader/self answered %d %v after SIGCONT",
		l0.ID, resumedAt.Sub(stoppedAt).Round(time.Millisecond), w.others[0].id, w.others[1].id, l1.ID, l1.Term, notSelf.code, notSelf.at.Sub(resumedAt))
	w.checkLapse(notSelf)
	w.checkNewLeader(l1, notSelf)
}

// lapseWatch watches a quorum cluster's leader the way a sidecar's user
// would: an SSE client of every node's /watch, a client.Watch of every
// node's API alone, and a poller of the leader's /leader/self.
type lapseWatch struct {
	t      *testing.T
	l0     client.LeaderInfo
	leader *proc
	others []*proc
	self   *stampLog // the leader's /leader/self answers
	logs   []namedLog
	// marks: how much of each log was read before the fault.
	marks map[*stampLog]int
	// lapsed: the leader's watch logs, and where each heard the lapse.
	lapsed []namedLog
}

type namedLog struct {
	name string
	p    *proc
	log  *stampLog
	from int
}

// newLapseWatch starts the watchers and returns once the leader's claim
// reached both of its watchers and its /leader/self answered 200.
func newLapseWatch(ctx context.Context, t *testing.T, ps []*proc, leader *proc, l0 client.LeaderInfo) *lapseWatch {
	t.Helper()
	w := &lapseWatch{t: t, l0: l0, leader: leader, marks: map[*stampLog]int{}}
	for _, p := range ps {
		if p != leader {
			w.others = append(w.others, p)
		}
		w.logs = append(w.logs, namedLog{name: "SSE /watch", p: p, log: watchSSE(ctx, t, p.httpA)},
			namedLog{name: "client.Watch", p: p, log: watchClient(ctx, t, p.api)})
	}
	claims := func(s reading) bool { return s.err == nil && s.li.Self && s.li.ID == l0.ID && s.li.Term >= l0.Term }
	for _, l := range w.logs {
		if l.p != leader {
			continue
		}
		if _, _, ok := l.log.wait(0, 5*time.Second, claims); !ok {
			t.Fatalf("%s on leader %d: no event claiming leadership in term %v or later within 5s:\n%s", l.name, l0.ID, l0.Term, l.log)
		}
	}
	w.self = pollSelf(ctx, leader.httpA)
	if _, _, ok := w.self.wait(0, 5*time.Second, func(s reading) bool { return s.code == http.StatusOK }); !ok {
		t.Fatalf("/leader/self on leader %d never answered 200:\n%s", l0.ID, w.self)
	}
	w.marks[w.self] = w.self.len()
	for _, l := range w.logs {
		w.marks[l.log] = l.log.len()
	}
	return w
}

// leaderSaysNotSelf waits for the leader's /leader/self to answer other
// than 200 after the marks.
func (w *lapseWatch) leaderSaysNotSelf(timeout time.Duration) reading {
	w.t.Helper()
	s, _, ok := w.self.wait(w.marks[w.self], timeout, func(s reading) bool { return s.err == nil && s.code != http.StatusOK })
	if !ok {
		w.t.Fatalf("/leader/self on node %d did not answer not-leader within %v:\n%s", w.l0.ID, timeout, w.self)
	}
	return s
}

// checkLapse: each watcher of the leader heard it stop claiming within
// leaseWatchTick plus leaseWatchSlack of notSelf (or before it).
func (w *lapseWatch) checkLapse(notSelf reading) {
	w.t.Helper()
	bound := leaseWatchTick + leaseWatchSlack
	for _, l := range w.logs {
		if l.p != w.leader {
			continue
		}
		// Waited for up to a second past the bound, so that a failure
		// says what came (if anything) instead of only that it was late.
		lapse, i, ok := l.log.wait(w.marks[l.log], time.Until(notSelf.at.Add(bound+time.Second)), func(s reading) bool { return s.err == nil && !s.li.Self })
		if !ok {
			w.t.Errorf("%s on node %d: no event without its claim %v after /leader/self answered %d:\n%s",
				l.name, w.l0.ID, bound+time.Second, notSelf.code, l.log)
			continue
		}
		late := lapse.at.Sub(notSelf.at)
		w.t.Logf("%s on node %d: the lapse (%s in term %v) %v after /leader/self's first %d", l.name, w.l0.ID, lapse.li.State, lapse.li.Term, late, notSelf.code)
		if late > bound {
			w.t.Errorf("%s on node %d heard of the lapse %v after /leader/self answered %d: more than a tick (%v) plus %v of scheduling slack\n%s",
				l.name, w.l0.ID, late, notSelf.code, leaseWatchTick, leaseWatchSlack, l.log)
		}
		l.from = i + 1
		w.lapsed = append(w.lapsed, l)
	}
}

// checkNewLeader: every watcher, the old leader's too, comes to name l1.
// A watcher of the old leader may hear it claim its old leadership again
// after the lapse, but only as /leader/self does: when its loop runs again
// soon enough, acknowledgements that waited in its inbox renew the lease
// (the followers' promises hold longer than the lease they make).
func (w *lapseWatch) checkNewLeader(l1 client.LeaderInfo, notSelf reading) {
	w.t.Helper()
	for _, l := range w.logs {
		if _, _, ok := l.log.wait(0, 5*time.Second, func(s reading) bool { return s.err == nil && s.li.ID == l1.ID && s.li.Term >= l1.Term }); !ok {
			w.t.Errorf("%s on node %d: never named the new leader %d (term %v):\n%s", l.name, l.p.id, l1.ID, l1.Term, l.log)
		}
	}
	reclaimed := func(s reading) bool { return s.err == nil && s.li.Self && s.li.Term <= w.l0.Term }
	for _, l := range w.lapsed {
		again, _, found := l.log.wait(l.from, 0, reclaimed)
		if !found {
			continue
		}
		if ok, _, said := w.self.wait(w.marks[w.self], 0, func(s reading) bool { return s.at.After(notSelf.at) && s.code == http.StatusOK }); said {
			w.t.Logf("%s on node %d: the lease started again in term %v at %s; /leader/self answered 200 again at %s", l.name, w.l0.ID,
				again.li.Term, again.at.Format("15:04:05.000000"), ok.at.Format("15:04:05.000000"))
			continue
		}
		w.t.Errorf("%s on node %d: claims its old leadership (term %v) again at %s, after the lapse, which /leader/self never did:\n%s\n/leader/self:\n%s",
			l.name, w.l0.ID, again.li.Term, again.at.Format("15:04:05.000000"), l.log, w.self)
	}
}

// stallablePipe is a process's stdout and stderr: a pipe the test copies to
// the process's log file until it stalls it. A stalled pipe is full, so the
// process's next log line blocks the goroutine that writes it, as a log
// collector that stops reading does in production.
type stallablePipe struct {
	r, w  *os.File
	gate  sync.Mutex // held while stalled; the copier takes it for each read
	stopC chan struct{}
}

// newStallablePipe makes the pipe as small as the kernel allows (one page)
// and starts copying it to logPath.
func newStallablePipe(t *testing.T, logPath string) *stallablePipe {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, os.Getpagesize()); err != nil {
		t.Fatalf("F_SETPIPE_SZ: %v", err)
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p := &stallablePipe{r: r, w: w, stopC: make(chan struct{})}
	go func() {
		defer f.Close()
		buf := make([]byte, 4096)
		for {
			p.gate.Lock()
			n, err := r.Read(buf)
			p.gate.Unlock()
			_, _ = f.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { r.Close(); w.Close() })
	return p
}

// stall stops the copying and fills the pipe: from now on a write of the
// process blocks until flow. The copier may be inside a read: a first
// filler line ends it, and it then waits for the gate.
func (p *stallablePipe) stall(t *testing.T) {
	t.Helper()
	locked := make(chan struct{})
	go func() { p.gate.Lock(); close(locked) }()
	deadline := time.After(5 * time.Second)
	filler := []byte(strings.Repeat(".", 79) + "\n")
	for {
		select {
		case <-locked:
			p.fill(t, filler)
			return
		case <-deadline:
			t.Fatal("the pipe's copier did not stop within 5s")
		default:
		}
		if _, err := p.w.Write(filler); err != nil {
			t.Fatal(err)
		}
		select {
		case <-locked:
		case <-time.After(time.Millisecond): // a write per millisecond until the copier's read returns
		}
	}
}

// fill writes to the pipe until it is full, down to the last byte. The
// write end is in blocking mode (the child shares it: os/exec took its
// Fd), so it is switched to non-blocking for the fill and back, lest a
// write of the child fail instead of waiting.
func (p *stallablePipe) fill(t *testing.T, filler []byte) {
	t.Helper()
	fd := int(p.w.Fd())
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := unix.SetNonblock(fd, false); err != nil {
			t.Fatal(err)
		}
	}()
	for _, chunk := range [][]byte{filler, []byte(".")} {
		for {
			if _, err := unix.Write(fd, chunk); err == unix.EAGAIN {
				break
			} else if err != nil {
				t.Fatalf("filling the pipe: %v", err)
			}
		}
	}
}

// flow copies the pipe again.
func (p *stallablePipe) flow() { p.gate.Unlock() }

// TestQuorumWatchSeesTheLapseOfAStalledLoop: as above, but the quorum
// leader's process keeps running while its loop is stuck: its log pipe is
// full (a collector that stopped reading) and a message from an unknown
// sender makes the loop log a warning, which blocks. Its sidecar and gRPC
// API still answer, and /leader/self turns 503 when its lease ends by the
// wall clock; its watchers must hear that within a tick, not when the loop
// runs again.
func TestQuorumWatchSeesTheLapseOfAStalledLoop(t *testing.T) {
	for _, alg := range algorithms {
		t.Run(alg, func(t *testing.T) { testStalledLoopLapse(t, alg) })
	}
}

func testStalledLoopLapse(t *testing.T, alg string) {
	dir := t.TempDir()
	var ps []*proc
	pipes := map[*proc]*stallablePipe{}
	for i := 1; i <= 3; i++ {
		p := newProc(t, dir, i, alg)
		p.extra = []string{"--quorum", "3"}
		pipes[p] = newStallablePipe(t, p.logPath)
		p.out = pipes[p].w
		ps = append(ps, p)
	}
	cleanupProcs(t, ps)
	stalled := map[*proc]bool{}
	t.Cleanup(func() { // before cleanupProcs' stop (cleanups run last first)
		for p, s := range stalled {
			if s {
				pipes[p].flow()
			}
		}
	})
	startJoined(ps)
	l0 := waitProcAgreement(t, ps, 15*time.Second, "three quorum processes agree on a leader", nil)
	leader := procByID(ps, l0.ID)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newLapseWatch(ctx, t, ps, leader, l0)

	pipes[leader].stall(t)
	stalled[leader] = true
	conn, err := grpc.NewClient(leader.peer, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Valid in form, from no member: the loop refuses it and logs why.
	go func() {
		hctx, hcancel := context.WithTimeout(ctx, 10*time.Second)
		defer hcancel()
		_, _ = pb.NewPeerClient(conn).Heartbeat(hctx, &pb.Heartbeat{From: 99, To: uint64(l0.ID), Term: uint64(l0.Term), Leader: uint64(l0.ID)})
	}()
	stalledAt := time.Now()
	notSelf := w.leaderSaysNotSelf(10 * time.Second)
	t.Logf("node %d: its loop stuck on a full log pipe; /leader/self answered %d %v later", l0.ID, notSelf.code, notSelf.at.Sub(stalledAt))
	w.checkLapse(notSelf)
	// The others need not elect while the stuck node still looks alive (it
	// answers gossip and takes peer messages in). Once its loop runs again
	// all three agree: on a new leadership, or on the same one if the
	// acknowledgements that waited in its inbox renewed its lease.
	pipes[leader].flow()
	stalled[leader] = false
	l1 := waitProcAgreement(t, ps, 15*time.Second, "all three agree once the loop runs again", nil)
	t.Logf("once node %d's loop ran again: node %d leads in term %v", l0.ID, l1.ID, l1.Term)
	w.checkNewLeader(l1, notSelf)
}
