//go:build linux

package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

func (r result) brief() string {
	switch {
	case r.Fail != "":
		return "FAIL: " + r.Fail
	case r.Shape == "idle":
		return fmt.Sprintf("rss %.0f B/conn heap %.0f stack %.0f", r.RSSPerConn, r.HeapPerConn, r.StackPerConn)
	}
	s := fmt.Sprintf("%9.0f/s p50 %s p99 %s p99.9 %s srv %.1fµs/call (core %.2f wait %.2f, cli %.2f wait %.2f, load %.1f)",
		r.QPS, us(r.P50), us(r.P99), us(r.P999), r.SrvCPUus, r.SrvCore, r.SrvWait, r.CliCore, r.CliWait, r.Load)
	if r.Errors > 0 {
		s += fmt.Sprintf(" errors %d (%s)", r.Errors, r.FirstError)
	}
	if r.Dropped > 0 {
		s += fmt.Sprintf(" dropped %d", r.Dropped)
	}
	if r.Shape == "heartbeat" {
		s += fmt.Sprintf(" sched lag %v", r.SchedLag.Round(time.Microsecond))
	}
	return s
}

func us(d time.Duration) string { return fmt.Sprintf("%.1fµs", float64(d)/1e3) }

// stat is the median and spread of one metric over the runs that succeeded.
type stat struct{ med, lo, hi float64 }

func stats(xs []float64) stat {
	if len(xs) == 0 {
		return stat{math.NaN(), math.NaN(), math.NaN()}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stat{m, s[0], s[len(s)-1]}
}

// cell formats a stat with prec decimals: "med (lo–hi)", or just "med" for
// one run.
func (s stat) cell(prec int) string {
	if math.IsNaN(s.med) {
		return "—"
	}
	f := func(v float64) string { return num(v, prec) }
	if s.lo == s.hi {
		return f(s.med)
	}
	return fmt.Sprintf("%s (%s–%s)", f(s.med), f(s.lo), f(s.hi))
}

// num formats v with prec decimals and thousands separators.
func num(v float64, prec int) string {
	s := fmt.Sprintf("%.*f", prec, v)
	intPart, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	out := b.String()
	if neg {
		out = "-" + out
	}
	if frac != "" {
		out += "." + frac
	}
	return out
}

func ratio(a, b stat) string {
	if math.IsNaN(a.med) || math.IsNaN(b.med) || b.med == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", a.med/b.med)
}

type agg struct {
	ok, n                              int
	qps, p50, p99, p999, cpu, srv, cli stat
	srvWait, cliWait                   stat
	errs, dropped                      stat
	rss, heap, stack, gor              stat
	fails                              []string
}

func aggregate(rs []result) agg {
	var a agg
	var srvWait, cliWait []float64
	var qps, p50, p99, p999, cpu, srv, cli, errs, dropped, rss, heap, stack, gor []float64
	for _, r := range rs {
		a.n++
		if r.Fail != "" {
			a.fails = append(a.fails, fmt.Sprintf("run %d: %s", r.Run, r.Fail))
			continue
		}
		a.ok++
		qps = append(qps, r.QPS)
		p50 = append(p50, float64(r.P50)/1e3)
		p99 = append(p99, float64(r.P99)/1e3)
		p999 = append(p999, float64(r.P999)/1e3)
		cpu = append(cpu, r.SrvCPUus)
		srv = append(srv, r.SrvCore)
		cli = append(cli, r.CliCore)
		srvWait = append(srvWait, r.SrvWait)
		cliWait = append(cliWait, r.CliWait)
		errs = append(errs, float64(r.Errors))
		dropped = append(dropped, float64(r.Dropped))
		rss = append(rss, r.RSSPerConn)
		heap = append(heap, r.HeapPerConn)
		stack = append(stack, r.StackPerConn)
		gor = append(gor, r.Goroutines)
	}
	a.qps, a.p50, a.p99, a.p999 = stats(qps), stats(p50), stats(p99), stats(p999)
	a.cpu, a.srv, a.cli = stats(cpu), stats(srv), stats(cli)
	a.errs, a.dropped = stats(errs), stats(dropped)
	a.srvWait, a.cliWait = stats(srvWait), stats(cliWait)
	a.rss, a.heap, a.stack, a.gor = stats(rss), stats(heap), stats(stack), stats(gor)
	return a
}

func report(cfg config, results []result) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }

	p("# peerbench %s\n\n", cfg.startedAt.Format("2006-01-02 15:04"))
	p("`%s`\n\n", cfg.cmdline)
	p("- commit %s (at start; the binary is built from the working tree), %s, %s/%s, %s, %d CPUs\n", cfg.commit, runtime.Version(), runtime.GOOS, runtime.GOARCH, cpuModel(), runtime.NumCPU())
	p("- server pinned to CPU %d, client to CPU %d, GOMAXPROCS %d in both; a fresh server process per (run, shape, kind)\n",
		cfg.serverCPU, cfg.clientCPU, cfg.procs)
	w := "each kind's default (grpc-workers: GOMAXPROCS)"
	if cfg.workers > 0 {
		w = fmt.Sprint(cfg.workers)
	}
	p("- %d run(s), kinds interleaved within each run (order rotated per run); window %v after %v warmup; workers: %s\n",
		cfg.runs, cfg.load.duration, cfg.load.warmup, w)
	cl := "raw (rawclient.go: minimal HTTP/2 client, one goroutine per connection keeping its callers' calls outstanding)"
	if cfg.load.client == "grpc" {
		cl = "grpc (grpc-go ClientConns, one goroutine per caller)"
	}
	p("- client of the closed-loop Echo shapes: %s; heartbeat and idle: grpc-go\n", cl)
	if cfg.tls {
		p("- TLS: mutual TLS 1.3 on every connection (transport/peerauth configs, ECDSA P-256 node certificates; handshakes before the window)\n")
	}
	p("- heartbeat: %d peers × 1 call / %v = %s calls/s offered, open loop; idle: %d connections\n",
		cfg.hbPeers, cfg.load.hbPeriod, num(float64(cfg.hbPeers)/cfg.load.hbPeriod.Seconds(), 0), cfg.idleConns)
	p("- server CPU from /proc/<pid>/stat utime+stime (10 ms ticks); latency client-side; \"core\" = CPU used / wall time of the window (1.00 = one full core); \"wait\" = the process's threads' run-queue delay / window (from /proc/<pid>/task/*/schedstat: CPU time lost to other load on the shared machine)\n")
	p("- load average at end: %s; took %v\n", loadAvg(), cfg.finishedAt.Sub(cfg.startedAt).Round(time.Second))
	p("\nCells: median over runs (min–max). ×grpc = this kind's median / stock grpc's median.\n")

	by := map[[2]string][]result{}
	for _, r := range results {
		k := [2]string{r.Shape, r.Kind}
		by[k] = append(by[k], r)
	}
	var failures []string
	for _, sh := range cfg.shapes {
		base := aggregate(by[[2]string{sh.name, "grpc"}])
		switch sh.mode {
		case "closed":
			p("\n## %s — %d conn(s) × %d caller(s), Echo %s, closed loop\n\n", sh.name, sh.conns, sh.callers, size(sh.payload))
			p("| kind | QPS | QPS ×grpc | p50 µs | p99 µs | p99.9 µs | srv CPU µs/call | CPU/call ×grpc | srv core | srv wait | cli core | cli wait | errors |\n")
			p("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		case "heartbeat":
			p("\n## heartbeat — %d peers, Peer.Heartbeat every %v each (%s/s offered), open loop\n\n",
				sh.conns, cfg.load.hbPeriod, num(float64(sh.conns)/cfg.load.hbPeriod.Seconds(), 0))
			p("Achieved below offered means the pair (server + one-core client) could not keep up: the backlog then grows through the window and the latencies measure it, not a steady state.\n\n")
			p("| kind | achieved/s | of offered | ×grpc | p50 µs | p99 µs | p99.9 µs | srv CPU µs/call | CPU/call ×grpc | srv core | srv wait | cli core | cli wait | errors | dropped |\n")
			p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		case "idle":
			p("\n## idle — %d idle grpc-go connections, server memory per connection\n\n", sh.conns)
			p("| kind | RSS B/conn | RSS ×grpc | HeapInuse B/conn | StackInuse B/conn | goroutines/conn |\n")
			p("|---|---|---|---|---|---|\n")
		}
		for _, k := range cfg.kinds {
			a := aggregate(by[[2]string{sh.name, k}])
			name := k
			if a.ok < a.n {
				name = fmt.Sprintf("%s (%d/%d ok)", k, a.ok, a.n)
			}
			for _, f := range a.fails {
				failures = append(failures, fmt.Sprintf("%s / %s %s", k, sh.name, f))
			}
			switch sh.mode {
			case "closed":
				p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name,
					a.qps.cell(0), ratio(a.qps, base.qps), a.p50.cell(1), a.p99.cell(1), a.p999.cell(1),
					a.cpu.cell(1), ratio(a.cpu, base.cpu), a.srv.cell(2), a.srvWait.cell(2), a.cli.cell(2), a.cliWait.cell(2), a.errs.cell(0))
			case "heartbeat":
				off := "—"
				if !math.IsNaN(a.qps.med) {
					off = fmt.Sprintf("%.0f%%", 100*a.qps.med*cfg.load.hbPeriod.Seconds()/float64(sh.conns))
				}
				p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name,
					a.qps.cell(0), off, ratio(a.qps, base.qps), a.p50.cell(1), a.p99.cell(1), a.p999.cell(1),
					a.cpu.cell(1), ratio(a.cpu, base.cpu), a.srv.cell(2), a.srvWait.cell(2), a.cli.cell(2), a.cliWait.cell(2), a.errs.cell(0), a.dropped.cell(0))
			case "idle":
				p("| %s | %s | %s | %s | %s | %s |\n", name,
					a.rss.cell(0), ratio(a.rss, base.rss), a.heap.cell(0), a.stack.cell(0), a.gor.cell(2))
			}
		}
	}
	if len(failures) > 0 {
		p("\n## Failures\n\n")
		for _, f := range failures {
			p("- %s\n", f)
		}
	}
	var errLines []string
	for _, r := range results {
		if r.Errors > 0 {
			errLines = append(errLines, fmt.Sprintf("- run %d %s / %s: %d errors, first: %s", r.Run, r.Kind, r.Shape, r.Errors, r.FirstError))
		}
	}
	if len(errLines) > 0 {
		p("\n## Call errors\n\n%s\n", strings.Join(errLines, "\n"))
	}

	p("\n## Raw per-run numbers\n\n")
	p("| run | shape | kind | calls | QPS | p50 µs | p99 µs | p99.9 µs | srv CPU µs/call | srv core | srv wait | cli core | cli wait | load | errors | dropped | RSS B/conn | heap B/conn | stack B/conn | failure |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		if r.Shape == "idle" {
			p("| %d | %s | %s | %d | | | | | | | | | | | | | %.0f | %.0f | %.0f | %s |\n", r.Run, r.Shape, r.Kind, r.Calls,
				r.RSSPerConn, r.HeapPerConn, r.StackPerConn, r.Fail)
			continue
		}
		p("| %d | %s | %s | %d | %.0f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %d | %d | | | | %s |\n", r.Run, r.Shape, r.Kind, r.Calls,
			r.QPS, float64(r.P50)/1e3, float64(r.P99)/1e3, float64(r.P999)/1e3, r.SrvCPUus, r.SrvCore, r.SrvWait, r.CliCore, r.CliWait, r.Load,
			r.Errors, r.Dropped, r.Fail)
	}
	return b.String()
}

func size(n int) string {
	if n >= 1<<10 && n%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func gitHead() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	head := strings.TrimSpace(string(out))
	// The binary was built from the working tree: say when the server
	// packages differed from HEAD.
	if st, err := exec.Command("git", "status", "--porcelain", "--", "transport").Output(); err == nil && len(st) > 0 {
		var files []string
		for _, l := range strings.Split(strings.TrimRight(string(st), "\n"), "\n") {
			if len(l) > 3 {
				files = append(files, l[3:])
			}
		}
		head += " + uncommitted changes in " + strings.Join(files, ", ")
	}
	return head
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "cpu unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return "cpu unknown"
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
