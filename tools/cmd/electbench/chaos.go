package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/electord/electord/tools/chaos"
	"github.com/electord/electord/tools/faultnet"
	"github.com/electord/electord/tools/history"
)

// chaosCmd is `electbench chaos`: the seeded fault schedule of
// tools/chaos on real processes in network namespaces, for a duration,
// for each algorithm and quorum setting given; it prints fault counts,
// heal-to-agreement p50/p99/max and every violation. It needs root.
//
//	electbench chaos --duration 1h --seed 7 --algorithm bully,ring --quorum 0,5
//	electbench chaos --duration 10m --algorithm bully,ring --named 3
//	electbench chaos --duration 5m --named 1000 --one-stream --placement spread
//
// With --named N, every run adds N named elections with one candidate app
// (`electbench app`) per node in each, and the app faults; in the runs
// with a quorum every node votes in them (docs/ELECTIONS.md, voters).
//
// The first SIGINT/SIGTERM ends the run after the current fault and still
// reports; a second one cleans up and exits at once.
func chaosCmd(args []string) error {
	fs := flag.NewFlagSet("chaos", flag.ExitOnError)
	duration := fs.Duration("duration", 10*time.Minute, "how long each configuration runs (whole tours: every fault kind once per tour)")
	seed := fs.Uint64("seed", 0, "schedule seed (0 = from the clock; printed)")
	algos := fs.String("algorithm", "bully", "algorithms, comma-separated (ring, bully)")
	quorums := fs.String("quorum", "0", "--quorum values, comma-separated (0 = off)")
	nodes := fs.Int("nodes", 5, "electord processes")
	bin := fs.String("electord", "", "electord binary (default: build cmd/electord)")
	extra := fs.String("args", "", "extra electord flags, space-separated")
	kinds := fs.String("kinds", "", "fault kinds, comma-separated (default all: "+strings.Join(chaos.Kinds, ",")+"; with --named also "+strings.Join(chaos.AppKinds, ",")+")")
	holdMin := fs.Duration("hold-min", 0, "shortest fault (0 = 600ms)")
	holdMax := fs.Duration("hold-max", 0, "longest fault (0 = 2.5s)")
	dir := fs.String("dir", "", "keep the nodes' data dirs and logs here (default: a temporary directory, removed)")
	out := fs.String("out", "", "also write the report to this file")
	overlaps := fs.String("overlaps", "", "write every two-claim episode of the plain rule (each election's, with the fault healed last before it) to this file, tab-separated")
	verbose := fs.Bool("v", false, "log every fault and process change")
	tag := fs.String("tag", "", "a label in the names of the namespaces and containers of the run (a-z, 0-9, at most 16)")
	named := fs.Int("named", 0, "named elections beside the default one, each with an app per node, and app kills and pauses")
	oneStream := fs.Bool("one-stream", false, "with --named: one app per node stands in every named election on one stream, and the observer reads each node's list of elections (plain mode only)")
	placement := fs.String("placement", "", "with --named: the placement every candidacy asks for (sticky, spread; empty: the node's default)")
	docker := fs.Bool("docker", false, "run the nodes as containers of a FROM scratch image on a Docker network (electord built with CGO_ENABLED=0) instead of in network namespaces")
	fs.Parse(args)
	if err := faultnet.Available(); err != nil {
		return err
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	var ks []string
	if *kinds != "" {
		ks = strings.Split(*kinds, ",")
		for _, k := range ks {
			if !slices.Contains(chaos.Kinds, k) && !slices.Contains(chaos.AppKinds, k) {
				return fmt.Errorf("--kinds: unknown kind %q", k)
			}
		}
	}
	var qs []int
	for _, q := range strings.Split(*quorums, ",") {
		v, err := strconv.Atoi(q)
		if err != nil {
			return fmt.Errorf("--quorum: %w", err)
		}
		qs = append(qs, v)
	}
	path, cleanup, err := harnessElectord(*bin, *docker)
	if err != nil {
		return err
	}
	defer cleanup()
	pr, closeOut, err := reportTo(*out)
	if err != nil {
		return err
	}
	defer closeOut()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		if _, ok := <-sigs; !ok {
			return
		}
		logf("electbench chaos: stopping after this fault (again to abort)")
		cancel()
		if _, ok := <-sigs; ok {
			faultnet.CloseAll()
			os.Exit(1)
		}
	}()
	defer faultnet.CloseAll()

	quiet := func(string, ...any) {}
	pr("# electbench chaos\n\n`electbench chaos %s`\n\n", strings.Join(args, " "))
	where := "each in its own network namespace"
	if *docker {
		where = "each in a Docker container (FROM scratch)"
	}
	pr("- %s, %s/%s, %d CPUs, %d electord processes %s, seed %d, %v per configuration, load average at start %s\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), *nodes, where, *seed, *duration, loadavg())
	type row struct {
		algo   string
		quorum int
		res    *chaos.Result
	}
	var rows []row
	for _, algo := range strings.Split(*algos, ",") {
		for _, q := range qs {
			if ctx.Err() != nil {
				break
			}
			logf("chaos: %s, quorum %d, %v", algo, q, *duration)
			o := chaos.Options{Binary: path, Nodes: *nodes, Algorithm: algo, Quorum: q, Args: strings.Fields(*extra), Tag: *tag,
				Seed: *seed, Duration: *duration, Kinds: ks, HoldMin: *holdMin, HoldMax: *holdMax, Logf: quiet, Docker: *docker}
			if *named > 0 {
				self, err := os.Executable()
				if err != nil {
					return err
				}
				o.Named, o.AppCommand, o.OneStream, o.Placement = *named, []string{self, "app"}, *oneStream, *placement
			}
			if *verbose {
				o.Logf = logf
			}
			if *dir != "" {
				o.Dir = fmt.Sprintf("%s/%s-q%d", *dir, algo, q)
				if err := os.MkdirAll(o.Dir, 0o755); err != nil {
					return err
				}
			}
			// A run stops by itself: whole tours take at most a few
			// minutes past the duration.
			rctx, rcancel := context.WithTimeout(ctx, *duration+10*time.Minute)
			res, err := chaos.Run(rctx, o)
			rcancel()
			if err != nil {
				return fmt.Errorf("%s, quorum %d: %w", algo, q, err)
			}
			rows = append(rows, row{algo, q, res})
			printChaos(pr, algo, q, res)
			if *overlaps != "" {
				if err := writeOverlaps(fmt.Sprintf("%s.%s-q%d", *overlaps, algo, q), res); err != nil {
					return err
				}
			}
		}
	}
	pr("\n## Summary\n\n")
	pr("| algorithm | quorum | ran | faults | heals | heal→agreement p50 ms | p99 ms | max ms | unhealed | leader changes after follower faults | violations |\n")
	pr("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		rep := r.res.Report
		faults := 0
		for _, n := range r.res.Faults {
			faults += n
		}
		pr("| %s | %d | %.0f s | %d | %d | %s | %s | %s | %d | %d of %d | %s |\n", r.algo, r.quorum, r.res.Elapsed.Seconds(), faults, rep.Heals,
			ms(history.Percentile(rep.HealTimes, .5)), ms(history.Percentile(rep.HealTimes, .99)), ms(history.Percentile(rep.HealTimes, 1)),
			rep.Unhealed, rep.LeaderChanges, rep.Calms, ruleCounts(rep))
		named, _ := shownNamed(r.res)
		for _, el := range named {
			er := el.Report
			pr("| %s, election %s | %d | | | %d | %s | %s | %s | %d | | %s |\n", r.algo, el.Name, r.quorum, er.Heals,
				ms(history.Percentile(er.HealTimes, .5)), ms(history.Percentile(er.HealTimes, .99)), ms(history.Percentile(er.HealTimes, 1)),
				er.Unhealed, ruleCounts(er))
		}
	}
	pr("\n### Heal to agreement by fault kind (p50 / p99 / max ms, unhealed)\n\n")
	var healKinds []string
	head, sep := "| fault |", "|---|"
	for _, r := range rows {
		for k := range r.res.Report.ByKind {
			if !slices.Contains(healKinds, k) {
				healKinds = append(healKinds, k)
			}
		}
		head += fmt.Sprintf(" %s, quorum %d |", r.algo, r.quorum)
		sep += "---|"
	}
	slices.Sort(healKinds)
	pr("%s\n%s\n", head, sep)
	for _, k := range healKinds {
		line := "| " + k + " |"
		for _, r := range rows {
			line += " " + kindHeals(r.res.Report.ByKind[k]) + " |"
		}
		pr("%s\n", line)
	}
	return nil
}

// kindHeals prints one kind's heal figures: "p50 / p99 / max" in ms, and
// the heals without agreement if any.
func kindHeals(kh *history.KindHeals) string {
	if kh == nil {
		return "–"
	}
	s := "–"
	if len(kh.Times) > 0 {
		s = fmt.Sprintf("%s / %s / %s", ms(history.Percentile(kh.Times, .5)), ms(history.Percentile(kh.Times, .99)), ms(history.Percentile(kh.Times, 1)))
	}
	if kh.Unhealed > 0 {
		s += fmt.Sprintf(", %d unhealed", kh.Unhealed)
	}
	return s
}

// slowKinds names the fault kinds whose slowest heal took longer than
// over, with their figures: an election's slow heals are found by kind.
func slowKinds(by map[string]*history.KindHeals, over time.Duration) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(by)) {
		kh := by[k]
		if kh.Unhealed > 0 || (len(kh.Times) > 0 && history.Percentile(kh.Times, 1) > over) {
			parts = append(parts, k+" "+kindHeals(kh))
		}
	}
	return strings.Join(parts, "; ")
}

// staticElectord builds cmd/electord with CGO_ENABLED=0, for a FROM
// scratch image.
func staticElectord() (string, func(), error) { return buildElectord("electbench-static-", true) }

// reportTo returns a printf to stdout and, if path is not empty, to the
// file path too; call done when finished.
func reportTo(path string) (pr func(string, ...any), done func(), err error) {
	w, done := io.Writer(os.Stdout), func() {}
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, nil, err
		}
		w, done = io.MultiWriter(os.Stdout, f), func() { f.Close() }
	}
	return func(format string, a ...any) { fmt.Fprintf(w, format, a...) }, done, nil
}

func ruleCounts(r history.Report) string {
	m := r.Rules()
	if len(m) == 0 {
		return "0"
	}
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// printChaos prints one configuration's fault counts, heal figures and
// violations.
func printChaos(pr func(string, ...any), algo string, quorum int, res *chaos.Result) {
	rep := res.Report
	pr("\n## %s, quorum %d (%.0f s)\n\n", algo, quorum, res.Elapsed.Seconds())
	var kinds []string
	for k, n := range res.Faults {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(kinds)
	pr("- faults: %s\n", strings.Join(kinds, ", "))
	pr("- %d answers observed, %d requests unanswered, %d leadership claims\n", rep.Obs, rep.Errs, rep.Claims)
	pr("- %d heals: heal-to-agreement p50 %s ms, p99 %s ms, max %s ms; %d without agreement\n", rep.Heals,
		ms(history.Percentile(rep.HealTimes, .5)), ms(history.Percentile(rep.HealTimes, .99)), ms(history.Percentile(rep.HealTimes, 1)), rep.Unhealed)
	pr("- follower-only faults: %d; after %d of them another node led\n", rep.Calms, rep.LeaderChanges)
	for _, k := range slices.Sorted(maps.Keys(rep.ByKind)) {
		pr("  - heals after %s: %d, heal-to-agreement p50 / p99 / max ms %s\n", k, rep.ByKind[k].Heals, kindHeals(rep.ByKind[k]))
	}
	pr("- violations: %s\n", ruleCounts(rep))
	if len(rep.Overlaps) > 0 {
		pr("- two nodes claimed at overlapping moments (plain mode: allowed, not violations): %d episodes, %d of them begun with every node up and no link cut, %d of those %v or more after the last heal\n", len(rep.Overlaps), rep.OverlapsWhole, rep.OverlapsCalm, chaos.LinkSettle)
	}
	if rep.Resolved > 0 {
		pr("- two claims overlapping by round trips but decided at different instants by the nodes' own windows (not violations): %d episodes\n", rep.Resolved)
	}
	bad := len(rep.Violations) > 0
	named, badEls := shownNamed(res)
	for _, el := range named {
		er := el.Report
		apps := 0
		for _, a := range el.History.Apps {
			if a.Standing {
				apps++
			}
		}
		pr("- election %s: %d answers observed, %d unanswered, %d claims; %d app starts; %d heals: p50 %s ms, p99 %s ms, max %s ms, %d without agreement; two-claim episodes judged allowed (plain rule) %d (%d begun with every node up and no link cut, %d of those %v or more after the last heal); overlapping by round trips only %d; violations: %s\n",
			el.Name, er.Obs, er.Errs, er.Claims, apps, er.Heals, ms(history.Percentile(er.HealTimes, .5)), ms(history.Percentile(er.HealTimes, .99)),
			ms(history.Percentile(er.HealTimes, 1)), er.Unhealed, len(er.Overlaps), er.OverlapsWhole, er.OverlapsCalm, chaos.LinkSettle, er.Resolved, ruleCounts(er))
		if badEls >= 0 {
			pr("  - elections with a violation: %d\n", badEls)
		}
		if slow := slowKinds(er.ByKind, time.Second); slow != "" {
			pr("  - heals slower than 1 s, by fault (p50 / p99 / max ms): %s\n", slow)
		}
		// Merged, the allowed overlaps of a thousand elections would fill
		// the report: only violations print the details then.
		bad = bad || len(er.Violations) > 0 || (badEls < 0 && len(er.Overlaps) > 0)
	}
	if !bad {
		return
	}
	const most = 200
	printViolations := func(title string, rep history.Report, vs []history.Violation) {
		if len(vs) == 0 {
			return
		}
		pr("\n%s:\n\n```\n", title)
		for i, v := range vs {
			if i == most {
				pr("... and %d more\n", len(vs)-most)
				break
			}
			pr("%s\n", rep.Format(v))
		}
		pr("```\n")
	}
	printViolations("default election", rep, rep.Violations)
	for _, el := range named {
		printViolations("election "+el.Name, el.Report, el.Report.Violations)
		printViolations("election "+el.Name+", two claims at overlapping moments (allowed: plain mode, or a quorum below a majority of the nodes)", el.Report, el.Report.Overlaps)
	}
	pr("\nfault log:\n\n```\n")
	for _, n := range res.History.Notes {
		pr("%9.3fs %s\n", n.At.Sub(rep.Start).Seconds(), n.Text)
	}
	pr("```\n")
}
