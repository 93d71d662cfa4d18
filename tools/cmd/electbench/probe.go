package main

// electbench probe: the app is tied to its node by --candidate-probe. Every
// electord node has a health app (an `electbench healthapp` process) and
// --candidate-probe on it. The benchmark SIGKILLs the leader's app (its
// node lives) and measures, on an observer node, the time from the signal
// until the observer's WatchLeader shows another leader; then it restarts
// the app, waits until its node stands again (its /metrics say
// electord_standing 1) and every node agrees, settles, and kills again.

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// healthAppMain is `electbench healthapp ADDR`: 200 on /healthz until killed.
func healthAppMain(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("healthapp: want one address, got %q", args)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	return http.ListenAndServe(args[0], mux)
}

// healthApp is one running health app.
type healthApp struct {
	addr string
	cmd  *exec.Cmd
}

// startHealthApp starts `electbench healthapp addr` and waits until it
// answers.
func startHealthApp(addr string) (*healthApp, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "healthapp", addr)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := &healthApp{addr: addr, cmd: cmd}
	if err := pollUntil(10*time.Second, func() bool { return httpOK("http://" + addr + "/healthz") }); err != nil {
		a.kill()
		return nil, fmt.Errorf("health app %s: %w", addr, err)
	}
	return a, nil
}

func (a *healthApp) kill() {
	if a == nil || a.cmd.ProcessState != nil {
		return
	}
	_ = a.cmd.Process.Kill()
	_ = a.cmd.Wait()
}

var probeHTTP = &http.Client{Timeout: time.Second}

func httpOK(url string) bool {
	resp, err := probeHTTP.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// pollUntil polls cond every millisecond until it holds or timeout passes.
func pollUntil(timeout time.Duration, cond func() bool) error {
	end := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(end) {
			return fmt.Errorf("not within %v", timeout)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

var standingRe = regexp.MustCompile(`(?m)^electord_standing (\S+)$`)

// standing reads electord_standing from a node's /metrics.
func standing(healthAddr string) bool {
	resp, err := probeHTTP.Get("http://" + healthAddr + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if m := standingRe.FindStringSubmatch(sc.Text()); m != nil {
			return m[1] == "1"
		}
	}
	return false
}

func probeCmd(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ExitOnError)
	cf := commonFlags(fs)
	kills := fs.Int("kills", 20, "app kills per algorithm and period")
	periods := fs.String("periods", "1s,100ms", "candidate-probe-period values to measure (the timeout is half of each)")
	settle := fs.Duration("settle", time.Second, "pause once the killed app's node stands again and every node agrees, before the next kill "+
		"(a leadership younger than a heartbeat timeout hands over by an election instead of a direct transfer)")
	out := fs.String("out", "", "also write the report (stdout) to this file")
	fs.Parse(args)
	var ps []time.Duration
	for _, s := range strings.Split(*periods, ",") {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("--periods: %w", err)
		}
		ps = append(ps, d)
	}
	sb, err := cf.open(*out)
	if err != nil {
		return err
	}
	defer sb.close()
	if len(sb.bins) != 1 {
		return fmt.Errorf("probe measures one binary (--electord with one path)")
	}
	bin, pr := sb.bins[0], sb.pr
	pr("# electbench probe: the leader's health app SIGKILLed, its node alive (--candidate-probe)\n\n")
	pr("`electbench %s`\n\n", strings.Join(os.Args[1:], " "))
	pr("- %s, %s/%s, %d CPUs, GOMAXPROCS=%d, load average at start %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), loadavg())
	pr("- %d electord processes, %s; each with a health app (`electbench healthapp`, one process each) and `--candidate-probe` on it, `--candidate-probe-timeout` half the period\n", *cf.nodes, sb.config)
	pr("- %d SIGKILLs per algorithm and period of the leader's app; after each the app is restarted, its node stands again, every node agrees, then %v of settling and a random part of a probe period (so the kill falls anywhere in a period)\n", *kills, *settle)
	pr("- measured: from just before the signal until a WatchLeader stream on an observer node (the next node after the leader) shows another leader\n")
	pr("- electord: `%s` (%s)\n", bin.path, describe(bin.path))
	pr("\n| algorithm | probe period | kills | p50 ms | p90 ms | p99 ms | max ms | failed |\n")
	pr("|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, period := range ps {
		for _, algo := range sb.algos {
			s, failed, err := measureProbe(bin.path, algo, *cf.nodes, strings.Fields(*cf.extra), period, *kills, *settle)
			if err != nil && len(s) == 0 {
				return fmt.Errorf("%s, period %v: %w", algo, period, err)
			}
			pr("| %s | %v | %d | %s | %s | %s | %s | %d |\n", algo, period, len(s), ms(s.pct(0.5)), ms(s.pct(0.9)), ms(s.pct(0.99)), ms(s.pct(1)), failed)
			if err != nil {
				pr("\n**%s, period %v stopped after %d kills**: %v\n\n", algo, period, len(s)+failed, err)
			}
		}
	}
	pr("\nload average at the end %s\n", loadavg())
	return nil
}

// measureProbe runs one cluster and kills the leader's app kills times.
func measureProbe(bin, algo string, n int, extra []string, period time.Duration, kills int, settle time.Duration) (samples, int, error) {
	appAddrs, healthAddrs := make([]string, n), make([]string, n)
	for i := range n {
		for _, a := range []*string{&appAddrs[i], &healthAddrs[i]} {
			p, err := freePort()
			if err != nil {
				return nil, 0, err
			}
			*a = fmt.Sprintf("127.0.0.1:%d", p)
		}
	}
	apps := make([]*healthApp, n)
	defer func() {
		for _, a := range apps {
			a.kill()
		}
	}()
	for i := range n {
		a, err := startHealthApp(appAddrs[i])
		if err != nil {
			return nil, 0, err
		}
		apps[i] = a
	}
	perNode := func(id int) []string {
		return []string{"--candidate-probe", "http://" + appAddrs[id-1] + "/healthz", "--candidate-probe-period", period.String(),
			"--candidate-probe-timeout", (period / 2).String(), "--health-addr", healthAddrs[id-1]}
	}
	c, err := startClusterWith(bin, algo, n, extra, perNode, logf)
	if err != nil {
		return nil, 0, err
	}
	defer c.stop()
	if _, _, err := c.waitAgreed(30*time.Second, anyLeader); err != nil {
		return nil, 0, fmt.Errorf("the cluster's first election: %w", err)
	}
	var s samples
	failed := 0
	for i := range kills {
		if err := pollUntil(30*time.Second, func() bool {
			for _, h := range healthAddrs {
				if !standing(h) {
					return false
				}
			}
			return true
		}); err != nil {
			return s, failed, fmt.Errorf("before kill %d: not every node stands: %w", i+1, err)
		}
		// A young leadership hands over by election, not transfer; and the
		// kill must fall anywhere in a probe period: the node stood again
		// just after a probe, so a fixed pause would kill just after one
		// every time and measure the worst case only.
		time.Sleep(settle + rand.N(period))
		li, _, err := c.waitAgreed(30*time.Second, anyLeader)
		if err != nil {
			return s, failed, fmt.Errorf("before kill %d: %w", i+1, err)
		}
		lid := li.GetId()
		observer := c.procs[int(lid)%n]
		t0 := time.Now() // before the signal: kill returns once the app is reaped
		apps[lid-1].kill()
		var seen time.Time
		if err := pollUntil(10*time.Second, func() bool {
			observer.mu.Lock()
			defer observer.mu.Unlock()
			v := observer.view
			if v != nil && v.GetId() != 0 && v.GetId() != lid {
				seen = observer.viewAt
				return true
			}
			return false
		}); err != nil {
			failed++
			logf("%s %v kill %d: node %d's app killed, observer node %d saw no other leader in 10s", algo, period, i+1, lid, observer.id)
		} else {
			s = append(s, seen.Sub(t0))
			logf("%s %v kill %d: node %d's app killed, observer node %d saw node %d lead after %s ms", algo, period, i+1, lid, observer.id,
				observerLeader(observer), ms(seen.Sub(t0)))
		}
		if apps[lid-1], err = startHealthApp(appAddrs[lid-1]); err != nil {
			return s, failed, err
		}
	}
	return s, failed, nil
}

func observerLeader(p *proc) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.view.GetId()
}
