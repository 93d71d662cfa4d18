package integration

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/electord/electord/client"
)

// nobody is the unprivileged user the disk-fault tests run electord as:
// root writes through any permission, a real user does not.
const nobody = 65534

// TestDiskRefusingWritesStopsLeadership (issue 11): three real processes
// run as an unprivileged user; one node's data dir stops taking writes
// (chmod 0555) and the leader is killed, so that node must persist a new
// term. Before, it logged "cannot persist the term; not sending" once, then
// led at the unpersisted term, and /healthz said 200. Now: it neither leads
// nor names a leader, /healthz answers 503 with the reason, the others
// elect without it, no two leaderships ever share a term, and when the dir
// takes writes again the node follows the leader.
func TestDiskRefusingWritesStopsLeadership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run electord as an unprivileged user (a root process writes through chmod)")
	}
	dir := nobodyDir(t)
	var ps []*proc
	for i := 1; i <= 3; i++ {
		p := newProc(t, dir, i, "bully")
		p.uid = nobody
		if i > 1 {
			p.join = []string{ps[0].gossip}
		}
		ps = append(ps, p)
	}
	t.Cleanup(func() {
		for _, p := range ps {
			_ = refuseWrites(p.dataDir, false)
			p.stop()
		}
		if t.Failed() {
			for _, p := range ps {
				t.Logf("---- node %d stderr ----\n%s", p.id, p.log())
			}
		}
	})
	for _, p := range ps {
		p.start()
	}
	first := waitProcAgreement(t, ps, 15*time.Second, "first election", nil)
	if first.ID != 3 {
		t.Fatalf("bully elected %d, want 3", first.ID)
	}
	// Watch every answer: one leader per term, whatever happens.
	terms := &termLedger{owner: map[client.Term]client.NodeID{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				li, err := p.cl.Leader(ctx)
				cancel()
				if err == nil && li.HasLeader() {
					terms.record(t, p.id, li)
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	// Node 2, the next in line, loses its disk; the leader dies.
	faulty := ps[1]
	if err := refuseWrites(faulty.dataDir, true); err != nil {
		t.Fatal(err)
	}
	if err := ps[2].signal(syscall.SIGKILL, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "node 1 leads alone, node 2 reports its fault", func() (bool, string) {
		views, desc := procViews(t, ps[:2])
		code, body := httpGet(t, "http://"+faulty.httpA+"/healthz")
		desc += " node 2 /healthz: " + strings.TrimSpace(string(body))
		ok := views[0].HasLeader() && views[0].ID == 1 && !views[1].HasLeader() &&
			code == http.StatusServiceUnavailable && strings.Contains(string(body), "cannot persist the term")
		return ok, desc
	})
	// It stays that way while the disk refuses: node 2 never leads.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		views, desc := procViews(t, ps[:2])
		if views[1].HasLeader() || views[1].Self {
			t.Fatalf("node 2 names a leader while its disk refuses writes: %s", desc)
		}
	}
	// The disk comes back: node 2 takes part again and follows node 1.
	if err := refuseWrites(faulty.dataDir, false); err != nil {
		t.Fatal(err)
	}
	li := waitProcAgreement(t, ps[:2], 15*time.Second, "node 2 back after its disk recovered", nil)
	if code, body := httpGet(t, "http://"+faulty.httpA+"/healthz"); code != http.StatusOK {
		t.Errorf("node 2 /healthz after recovery: %d %s", code, body)
	}
	t.Logf("after recovery: node %d leads at %v", li.ID, li.Term)
	if b, err := os.ReadFile(filepath.Join(faulty.dataDir, "term")); err != nil || !strings.HasPrefix(string(b), "electord-term v1") {
		t.Errorf("node 2's term file after recovery: %q, %v", b, err)
	}
}

// refuseWrites makes dir and every file in it refuse an unprivileged
// process's writes (on), or take them again (off): the directory alone
// would still let the term store write its leader file in place.
func refuseWrites(dir string, on bool) error {
	dirMode, fileMode := os.FileMode(0o755), os.FileMode(0o644)
	if on {
		dirMode, fileMode = 0o555, 0o444
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := os.Chmod(filepath.Join(dir, e.Name()), fileMode); err != nil {
				return err
			}
		}
	}
	return os.Chmod(dir, dirMode)
}

// termLedger checks that every answer naming a leader names one node per
// term.
type termLedger struct {
	mu    sync.Mutex
	owner map[client.Term]client.NodeID
}

func (l *termLedger) record(t *testing.T, from int, li client.LeaderInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.owner[li.Term]; ok && prev != li.ID {
		t.Errorf("term %v led by %d and, says node %d, by %d", li.Term, prev, from, li.ID)
	}
	l.owner[li.Term] = li.ID
}

// TestUnwritableDataDirRefusedAtStart (issue 11): a data dir the process
// cannot write is refused at start with exit 2, naming data-dir, the path
// and the user id; before, the node ran and elected at terms it never saved.
func TestUnwritableDataDirRefusedAtStart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run electord as an unprivileged user")
	}
	dir := nobodyDir(t)
	p := newProc(t, dir, 1, "bully")
	p.uid = nobody
	if err := os.MkdirAll(p.dataDir, 0o755); err != nil { // root-owned: nobody cannot write it
		t.Fatal(err)
	}
	p.start()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.stop()
		t.Fatal("electord kept running on a data dir it cannot write")
	}
	code := -1
	if e, ok := p.err.(interface{ ExitCode() int }); ok {
		code = e.ExitCode()
	}
	log := p.log()
	if code != 2 || !strings.Contains(log, "data-dir") || !strings.Contains(log, p.dataDir) || !strings.Contains(log, "uid 65534") {
		t.Fatalf("exit %d (%v), log:\n%s\nwant exit 2 naming data-dir, %s and uid 65534", code, p.err, log, p.dataDir)
	}
}

// nobodyDir is a temporary directory the unprivileged user can write, under
// parents it can traverse.
func nobodyDir(t *testing.T) string {
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
