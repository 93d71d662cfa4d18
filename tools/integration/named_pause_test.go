package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/electord/electord/client"
)

// selfPoll is one answer of a node's /leader/self (the default election)
// or /elections/{name}/leader/self: the node claimed to lead somewhere
// between sent and recv.
type selfPoll struct {
	node       int
	sent, recv time.Time
	code       int
	term       uint64
}

// pauseSpan is a node's SIGSTOP to its SIGCONT: it answered nothing in
// between.
type pauseSpan struct {
	node      int
	stop, con time.Time
}

// selfPolls collects the answers of every poller, and the pauses.
type selfPolls struct {
	mu     sync.Mutex
	polls  map[string][]selfPoll // by path
	pauses []pauseSpan
}

func (s *selfPolls) paused(sp pauseSpan) {
	s.mu.Lock()
	s.pauses = append(s.pauses, sp)
	s.mu.Unlock()
}

func (s *selfPolls) add(path string, p selfPoll) {
	s.mu.Lock()
	s.polls[path] = append(s.polls[path], p)
	s.mu.Unlock()
}

// poll asks node's path once and records the answer (a failed request
// records nothing: it claimed nothing anyone saw).
func (s *selfPolls) poll(cl *http.Client, node int, addr, path string) {
	sent := time.Now()
	resp, err := cl.Get("http://" + addr + path)
	if err != nil {
		return
	}
	var body struct {
		Term uint64 `json:"term"`
	}
	err = json.NewDecoder(resp.Body).Decode(&body)
	recv := time.Now()
	resp.Body.Close()
	if err != nil {
		return
	}
	s.add(path, selfPoll{node: node, sent: sent, recv: recv, code: resp.StatusCode, term: body.Term})
}

// judge judges path's claims (200) by two rules. An answer was produced
// somewhere in [sent, recv], but never while its node was paused: a
// request sent after the SIGSTOP and answered after the SIGCONT waited out
// the pause, so its interval starts at the SIGCONT. (One answered before
// the SIGCONT was answered before the signal took effect.)
//
//   - Overlap, the chaos checker's rule (tools/history, twoClaims): two
//     claims of different nodes whose intervals overlap may have been made
//     at the same instant.
//   - Stale term: a claim at a term below one another node claimed before
//     it (the older claim produced after the newer was received). In
//     quorum mode a term is won only after the leases of the terms below
//     it ended, so a node claiming an older term after that claims past
//     its lease.
//
// It returns how many claims there were and each violation, described.
func (s *selfPolls) judge(path string, t0 time.Time) (claims int, bad []string) {
	s.mu.Lock()
	var cs []selfPoll
	for _, p := range s.polls[path] {
		if p.code != http.StatusOK {
			continue
		}
		for _, sp := range s.pauses {
			if sp.node == p.node && !p.sent.Before(sp.stop) && p.sent.Before(sp.con) && p.recv.After(sp.con) {
				p.sent = sp.con
			}
		}
		cs = append(cs, p)
	}
	s.mu.Unlock()
	desc := func(p selfPoll) string {
		return fmt.Sprintf("%d at term %d [%.1f, %.1f] ms", p.node, p.term, ms(p.sent.Sub(t0)), ms(p.recv.Sub(t0)))
	}
	slices.SortFunc(cs, func(a, b selfPoll) int { return a.sent.Compare(b.sent) })
	var active []selfPoll
	for _, c := range cs {
		keep := active[:0]
		for _, a := range active {
			if !a.recv.Before(c.sent) {
				keep = append(keep, a)
			}
		}
		active = keep
		for _, a := range active {
			if a.node != c.node {
				end := a.recv
				if c.recv.Before(end) {
					end = c.recv
				}
				bad = append(bad, fmt.Sprintf("overlap: nodes %s and %s (%.2f ms)", desc(a), desc(c), ms(end.Sub(c.sent))))
			}
		}
		active = append(active, c)
	}
	// Stale terms: for each claim, the highest term claimed by another
	// node in an answer received before this one was sent.
	byRecv := slices.Clone(cs)
	slices.SortFunc(byRecv, func(a, b selfPoll) int { return a.recv.Compare(b.recv) })
	i := 0
	var top selfPoll
	for _, c := range cs { // by sent
		for ; i < len(byRecv) && byRecv[i].recv.Before(c.sent); i++ {
			if byRecv[i].term > top.term {
				top = byRecv[i]
			}
		}
		if top.term > c.term && top.node != c.node {
			bad = append(bad, fmt.Sprintf("stale term: node %s after node %s", desc(c), desc(top)))
		}
	}
	return len(cs), bad
}

// waitStopped waits until every thread of pid is stopped (state T in
// /proc/PID/task/TID/stat): kill(2) returns once the signal is queued, and
// a thread on a CPU may run a little longer.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	stopped := func() (bool, string) {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return false, err.Error()
		}
		for _, task := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
			if err != nil {
				return false, err.Error()
			}
			// The state follows the command's closing parenthesis.
			st := string(b)
			if i := strings.LastIndexByte(st, ')'); i < 0 || i+2 >= len(st) || (st[i+2] != 'T' && st[i+2] != 't') {
				return false, "thread " + task.Name() + " runs"
			}
		}
		return true, ""
	}
	eventually(t, 5*time.Second, fmt.Sprintf("process %d stops", pid), stopped)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Quorum mode, five processes, every node a voter: the node leading a
// named election is paused (SIGSTOP) for 0.8 to 2 s, past its lease and
// the promises its voters gave it, so the others elect another, and then
// resumed (SIGCONT), again and again, while every node's /leader/self of
// the named election and of the default election is polled. No two nodes
// may answer 200 in overlapping intervals, judged by request send and
// receive times as the chaos checker does, and none may claim a term
// below one another node claimed before (see judge). While a node is paused, a
// request is sent to it every few milliseconds besides: each waits in the
// kernel and is answered after SIGCONT, so the moments right after the
// resume, when the node has yet to catch up, are read densely. The leader
// also votes in a second election led elsewhere (apps on nodes 1 and 2
// only), as in the chaos schedule's three elections, so its named clock is
// due before its lease ends.
func TestNamedQuorumLeaderPaused(t *testing.T) {
	for _, alg := range algorithms {
		t.Run(alg, func(t *testing.T) { testNamedQuorumLeaderPaused(t, alg) })
	}
}

func testNamedQuorumLeaderPaused(t *testing.T, alg string) {
	ps := startProcsWith(t, 5, alg, []string{"--quorum", "5"})
	waitProcAgreement(t, ps, 30*time.Second, "five processes agree on a leader", nil)
	for _, p := range ps {
		startApp(t, "http", p.httpA, "jobs", fmt.Sprintf("app-%d", p.id))
	}
	for _, p := range ps[:2] {
		startApp(t, "http", p.httpA, "aux", fmt.Sprintf("aux-%d", p.id))
	}
	named := func(name string) (uint64, uint64, bool, string) {
		var id, term uint64
		var b strings.Builder
		ok := true
		for i, p := range ps {
			code, lid, lterm, _, err := electionLeader(p.httpA, name)
			fmt.Fprintf(&b, " %d:%d@%d(%d %v)", p.id, lid, lterm, code, err)
			if code != http.StatusOK || lid == 0 || (i > 0 && (lid != id || lterm != term)) {
				ok = false
			}
			id, term = lid, lterm
		}
		return id, term, ok, b.String()
	}
	agree := func(what string) (id uint64) {
		t.Helper()
		for _, name := range []string{"aux", "jobs"} {
			eventually(t, 20*time.Second, what+": every node names one leader of "+name, func() (bool, string) {
				lid, _, ok, desc := named(name)
				id = lid
				return ok, desc
			})
		}
		return id
	}
	agree("before the pauses")

	polls := &selfPolls{polls: map[string][]selfPoll{}}
	paths := []string{"/elections/jobs/leader/self", "/leader/self"}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	cl := &http.Client{Timeout: 10 * time.Second}
	burst := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	// inFlight[id] is held (read) by each steady poll of node id and
	// taken (write) around its SIGSTOP, so that no poll is on its way
	// while the signal lands: one sent before the signal and answered
	// after the SIGCONT could have been answered on either side of the
	// pause, and judge could not place it.
	inFlight := map[int]*sync.RWMutex{}
	for _, p := range ps {
		inFlight[p.id] = &sync.RWMutex{}
	}
	for _, p := range ps {
		for _, path := range paths {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					inFlight[p.id].RLock()
					polls.poll(cl, p.id, p.httpA, path)
					inFlight[p.id].RUnlock()
					time.Sleep(2 * time.Millisecond) // polling interval, not a wait for an outcome
				}
			}()
		}
	}
	t0 := time.Now()
	pauses := []time.Duration{800 * time.Millisecond, 1200 * time.Millisecond, 1600 * time.Millisecond, 2 * time.Second}
	for round := range 8 {
		leader := agree(fmt.Sprintf("round %d", round))
		p := procByID(ps, client.NodeID(leader))
		_, dflt := procViews(t, ps)
		pid := p.cmd.Process.Pid
		d := pauses[round%len(pauses)]
		inFlight[p.id].Lock()
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP to node %d: %v", p.id, err)
		}
		waitStopped(t, pid)
		paused := time.Now()
		inFlight[p.id].Unlock()
		span := pauseSpan{node: p.id, stop: paused}
		// While it is paused, requests pile up at it, answered after SIGCONT.
		for time.Since(paused) < d {
			for _, path := range paths {
				wg.Add(1)
				go func() { defer wg.Done(); polls.poll(burst, p.id, p.httpA, path) }()
			}
			time.Sleep(5 * time.Millisecond) // the pause's length, not a wait for an outcome
		}
		span.con = time.Now() // before the signal: an answer comes after it
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatalf("SIGCONT to node %d: %v", p.id, err)
		}
		polls.paused(span)
		t.Logf("%s round %d: node %d (leading jobs; default views %s) paused %v at %.0f ms", alg, round, p.id, dflt, d, ms(paused.Sub(t0)))
	}
	agree("after the pauses")
	close(stop)
	wg.Wait()
	for _, path := range paths {
		n, bad := polls.judge(path, t0)
		t.Logf("%s %s: %d claims, %d violations", alg, path, n, len(bad))
		for i, b := range bad {
			if i < 20 {
				t.Errorf("%s %s: two nodes claim at once: %s", alg, path, b)
			}
		}
	}
}
