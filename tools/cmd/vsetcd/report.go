package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// pct is the nearest-rank percentile p (0 < p ≤ 1) of ds: with 20 samples
// p99 is the maximum.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	c := slices.Clone(ds)
	slices.Sort(c)
	i := int(math.Ceil(p*float64(len(c)))) - 1
	return c[min(max(i, 0), len(c)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }

// report prints the summary table and every sample.
func report(pr func(string, ...any), systems []*system, all []sample) {
	pr("Milliseconds from the signal to the leader's process. \"every survivor knows\": until the last surviving candidate reports the new leader (electord: each node's sidecar `/watch` event as the harness reads it; etcd: each candidate's `Election.Observe`); \"new leader knows\": until the new leader itself does (electord: its `/watch` says `self`; etcd: its `Campaign` returns).\n\n")
	pr("| system | event | measure | events | p50 | p90 | p99 | max | failed |\n")
	pr("|---|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, kind := range []string{crash, graceful} {
		for _, s := range systems {
			var known, self []time.Duration
			failed, n := 0, 0
			for _, x := range all {
				if x.sys != s.name || x.kind != kind {
					continue
				}
				n++
				if x.failed != "" {
					failed++
					continue
				}
				known, self = append(known, x.known), append(self, x.selfDur)
			}
			for _, row := range []struct {
				name string
				ds   []time.Duration
			}{{"every survivor knows", known}, {"new leader knows", self}} {
				pr("| %s | %s | %s | %d | %s | %s | %s | %s | %d |\n", s.name, kind, row.name, n,
					ms(pct(row.ds, 0.5)), ms(pct(row.ds, 0.9)), ms(pct(row.ds, 0.99)), ms(pct(row.ds, 1)), failed)
			}
		}
	}
	pr("\n## Every event\n\n")
	pr("| # | system | event | old leader | new leader | every survivor knows, ms | new leader knows, ms | failed |\n")
	pr("|---:|---|---|---|---|---:|---:|---|\n")
	for _, x := range all {
		pr("| %d | %s | %s | %s | %s | %s | %s | %s |\n", x.n, x.sys, x.kind, x.old, x.new, ms(x.known), ms(x.selfDur), x.failed)
	}
}
