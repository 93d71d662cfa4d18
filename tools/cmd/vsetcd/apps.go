package main

// vsetcd apps: the application is the candidate, in both systems. electord's
// side is `electbench apps` (five nodes, five candidate app processes
// campaigning in the named election "jobs", one through each node; the
// leading app SIGKILLed; a WatchLeader observer on the node after the
// leader's), run as a child so that its figures are exactly that command's.
// etcd's side is the same experiment on an etcd cluster of as many members:
// candidate i runs concurrency.Election.Campaign through member i at the
// smallest session TTL; the harness observes with Election.Observe through
// the member after the leader's; the leading candidate is SIGKILLed, and the
// sample is the time from just before the signal until that observer shows
// another candidate leading (a key created later than the old leader's).

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// appsKill is one SIGKILL of etcd's leading candidate.
type appsKill struct {
	n                  int
	old, new, observer string        // candidates; the observer's member
	d                  time.Duration // signal to the observer's new leader
	failed             string
}

func runApps(c config, dir, commit, bin, etcdPath, candBin string, pr func(string, ...any)) error {
	for _, s := range c.systems {
		if s != "electord" && s != "etcd" {
			return fmt.Errorf("--systems: want electord and/or etcd, not %q", s)
		}
	}
	pr("# electord vs etcd election: the leading app SIGKILLed\n\n")
	pr("`go -C tools run ./cmd/vsetcd apps %s`\n\n", strings.Join(os.Args[2:], " "))
	pr("- %s, %s/%s, %d CPUs, load average at start %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), loadavg())
	pr("- each system in turn, electord first: %d candidate app processes on %d nodes/members, one through each; %d SIGKILLs of the leading app per electord algorithm and for etcd; the sample is from just before the signal until an observer on the node/member after the leader's sees another candidate lead\n\n",
		c.candidates, c.candidates, c.kills)
	if slices.Contains(c.systems, "electord") {
		report, err := electordApps(c, dir, bin)
		if err != nil {
			return err
		}
		pr("## electord (`electbench apps`), electord %s\n\n", commit)
		// Its title goes: this report has its own.
		if l, rest, ok := strings.Cut(report, "\n"); ok && strings.HasPrefix(l, "# ") {
			report = strings.TrimLeft(rest, "\n")
		}
		pr("%s", report)
	}
	if slices.Contains(c.systems, "etcd") {
		edir := filepath.Join(dir, "etcd")
		if err := os.MkdirAll(edir, 0o755); err != nil {
			return err
		}
		et, err := startEtcd(etcdPath, candBin, edir, c.candidates, c.etcdMembers, c.ttl, c.etcdArgs)
		if err != nil {
			return err
		}
		defer et.stop()
		load0 := loadavg()
		kills, err := et.killLeaders(c.kills, c.settle, c.agreeTimeout)
		if err != nil {
			return err
		}
		pr("\n## etcd\n\n")
		pr("- `%s` (%s); %s; the server grants at least %d s (asked for 1 s); the candidates' sessions were granted %s s\n",
			etcdPath, etcdVersion(etcdPath), et.sys.note, et.minTTL, et.grantedTTLs())
		pr("- load average at the first kill %s, at the end %s; candidates that exited unasked: %d\n\n", load0, loadavg(), et.sys.unexpectedExits())
		appsReport(pr, kills)
	}
	return nil
}

// electordApps runs `electbench apps` (built from this module) against bin
// and returns its report.
func electordApps(c config, dir, bin string) (string, error) {
	ebin, out := filepath.Join(dir, "electbench"), filepath.Join(dir, "electbench-apps.md")
	if err := goBuild(".", ebin, "./cmd/electbench"); err != nil {
		return "", err
	}
	args := []string{"apps", "--electord", bin, "--kills", strconv.Itoa(c.kills), "--algorithms", c.algos,
		"--nodes", strconv.Itoa(c.candidates), "--settle", c.settle.String(), "--out", out}
	if len(c.extra) > 0 {
		args = append(args, "--args", strings.Join(c.extra, " "))
	}
	logf("electord: electbench %s", strings.Join(args, " "))
	p, err := startChild(ebin, args, io.Discard, os.Stderr, nil)
	if err != nil {
		return "", err
	}
	<-p.exited
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		return "", fmt.Errorf("electbench apps exited %d", code)
	}
	b, err := os.ReadFile(out)
	return string(b), err
}

// killLeaders SIGKILLs the leading candidate kills times. Before each kill
// every candidate runs and all agree on the leader for settle; an observer
// on the member after the leader's member must show that leadership; the
// killed candidate is restarted once the observer saw the next one lead (or
// timeout passed: the kill counts as failed).
func (e *etcdSide) killLeaders(kills int, settle, timeout time.Duration) ([]appsKill, error) {
	var res []appsKill
	for i := range kills {
		old, err := e.sys.waitStable(60*time.Second, settle)
		if err != nil {
			return res, fmt.Errorf("before kill %d: %w", i+1, err)
		}
		m := e.sys.member(old.leader)
		k := appsKill{n: i + 1, old: old.leader}
		at := slices.Index(e.endpoints, e.endpoint[m.name])
		obsEP := e.endpoints[(at+1)%len(e.endpoints)]
		k.observer = fmt.Sprintf("e%d", (at+1)%len(e.endpoints)+1)
		obs, err := e.observe(obsEP, old)
		if err != nil {
			return res, fmt.Errorf("kill %d: %w", i+1, err)
		}
		m.mu.Lock()
		p := m.proc
		m.mu.Unlock()
		m.markStopped()
		t0 := time.Now() // before the signal: the wait returns once the process is reaped
		p.signal(syscall.SIGKILL)
		<-p.exited
		select {
		case <-obs.done:
			k.new, k.d = obs.leader, obs.at.Sub(t0)
			logf("etcd kill %d: %s killed, observer on %s saw %s lead after %s ms", k.n, k.old, k.observer, k.new, ms(k.d))
		case <-time.After(timeout):
			k.failed = fmt.Sprintf("the observer saw no new leader within %v", timeout)
			logf("etcd kill %d: FAILED: %s", k.n, k.failed)
		}
		obs.stop()
		res = append(res, k)
		if err := e.sys.startMember(m); err != nil {
			return res, err
		}
	}
	return res, nil
}

// etcdObserver is the harness's Election.Observe through one member.
type etcdObserver struct {
	base, done chan struct{} // closed once it showed the old leader; a new one
	leader     string        // the new leader, set before done closes
	at         time.Time
	stop       func()
}

// observe starts an observer through endpoint and returns once it has shown
// old (the leader name and its key's create revision).
func (e *etcdSide) observe(endpoint string, old view) (*etcdObserver, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	// Observe needs a session only for its client: the observer never puts a key.
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(e.ttl)))
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("observer session: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := &etcdObserver{base: make(chan struct{}), done: make(chan struct{})}
	ended := make(chan struct{})
	o.stop = func() { cancel(); <-ended; s.Close(); cli.Close() }
	ch := concurrency.NewElection(s, electionPrefix).Observe(ctx)
	go func() {
		defer close(ended)
		based := false
		for resp := range ch {
			now := time.Now()
			if len(resp.Kvs) == 0 {
				continue
			}
			name, rev := string(resp.Kvs[0].Value), uint64(resp.Kvs[0].CreateRevision)
			if !based && name == old.leader && rev == old.term {
				based = true
				close(o.base)
			}
			if based && name != old.leader && rev > old.term {
				o.leader, o.at = name, now
				close(o.done)
				for range ch { // until stop cancels the observation
				}
				return
			}
		}
	}()
	select {
	case <-o.base:
		return o, nil
	case <-time.After(10 * time.Second):
		o.stop()
		return nil, fmt.Errorf("the observer through %s never showed %s (revision %d) leading", endpoint, old.leader, old.term)
	}
}

// appsReport prints etcd's figures in the columns of electbench apps's
// table, then every kill.
func appsReport(pr func(string, ...any), kills []appsKill) {
	var ds []time.Duration
	failed := 0
	for _, k := range kills {
		if k.failed != "" {
			failed++
			continue
		}
		ds = append(ds, k.d)
	}
	pr("| system | measured | samples | p50 ms | p90 ms | p99 ms | max ms | failed |\n")
	pr("|---|---|---:|---:|---:|---:|---:|---:|\n")
	pr("| etcd | new leader seen by the observer | %d | %s | %s | %s | %s | %d |\n",
		len(ds), ms(pct(ds, 0.5)), ms(pct(ds, 0.9)), ms(pct(ds, 0.99)), ms(pct(ds, 1)), failed)
	pr("\n| # | killed | new leader | observer's member | ms | failed |\n")
	pr("|---:|---|---|---|---:|---|\n")
	for _, k := range kills {
		pr("| %d | %s | %s | %s | %s | %s |\n", k.n, k.old, k.new, k.observer, ms(k.d), k.failed)
	}
}
