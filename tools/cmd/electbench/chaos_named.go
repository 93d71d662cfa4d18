package main

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/electord/electord/tools/chaos"
	"github.com/electord/electord/tools/history"
)

// manyNamed is how many named elections a chaos report still shows one by
// one; past it (a sharded run, --one-stream) they are shown merged.
const manyNamed = 10

// shownNamed is the named elections as a report shows them: each, or past
// manyNamed all merged into one (its app starts those of the first
// election's record, which with one stream per node is every election's),
// with how many had a violation (-1 when not merged).
func shownNamed(res *chaos.Result) ([]chaos.Election, int) {
	if len(res.Named) <= manyNamed {
		return res.Named, -1
	}
	m, bad := mergedNamed(res)
	return []chaos.Election{{Name: fmt.Sprintf("(all %d, merged)", len(res.Named)), Report: m,
		History: history.History{Apps: res.Named[0].History.Apps}}}, bad
}

// mergedNamed merges every named election's report into one: counts and
// heal times summed, each violation and overlap named by its election. It
// also returns how many elections had a violation.
func mergedNamed(res *chaos.Result) (history.Report, int) {
	m := history.Report{Start: res.Report.Start, ByKind: map[string]*history.KindHeals{}}
	bad := 0
	for _, el := range res.Named {
		er := el.Report
		if len(er.Violations) > 0 {
			bad++
		}
		m.HealTimes = append(m.HealTimes, er.HealTimes...)
		m.Unhealed += er.Unhealed
		m.Heals += er.Heals
		m.Obs += er.Obs
		m.Errs += er.Errs
		m.Claims += er.Claims
		m.OverlapsWhole += er.OverlapsWhole
		m.OverlapsCalm += er.OverlapsCalm
		m.Resolved += er.Resolved
		for _, v := range er.Violations {
			v.Detail = fmt.Sprintf("election %s: %s", el.Name, v.Detail)
			m.Violations = append(m.Violations, v)
		}
		for _, v := range er.Overlaps {
			v.Detail = fmt.Sprintf("election %s: %s", el.Name, v.Detail)
			m.Overlaps = append(m.Overlaps, v)
		}
		for _, k := range slices.Sorted(maps.Keys(er.ByKind)) {
			kh := m.ByKind[k]
			if kh == nil {
				kh = &history.KindHeals{}
				m.ByKind[k] = kh
			}
			kh.Heals += er.ByKind[k].Heals
			kh.Unhealed += er.ByKind[k].Unhealed
			kh.Times = append(kh.Times, er.ByKind[k].Times...)
		}
	}
	slices.SortFunc(m.Violations, func(a, b history.Violation) int { return a.At.Compare(b.At) })
	slices.SortFunc(m.Overlaps, func(a, b history.Violation) int { return a.At.Compare(b.At) })
	return m, bad
}

// writeOverlaps writes every two-claim episode of res (the default
// election's and each named one's) to path, one per line: seconds since
// the run began, the election, whether every node was up and no link cut,
// the fault healed last before it and how long before (ms), and the
// episode as the checker told it.
func writeOverlaps(path string, res *chaos.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "at_s\telection\twhole\tlast_heal\tsince_heal_ms\tdetail\n")
	els := append([]chaos.Election{{Name: "(default)", Report: res.Report, History: res.History}}, res.Named...)
	heals := res.History.Heals
	for _, el := range els {
		for _, v := range el.Report.Overlaps {
			last, since := "-", -1.0
			i := sort.Search(len(heals), func(i int) bool { return heals[i].At.After(v.At) }) - 1
			if i >= 0 {
				last, since = heals[i].What, float64(v.At.Sub(heals[i].At).Microseconds())/1000
			}
			fmt.Fprintf(w, "%.3f\t%s\t%t\t%s\t%.1f\t%s\n", v.At.Sub(res.Report.Start).Seconds(), el.Name,
				strings.Contains(v.Detail, history.WholeMark), last, since, v.Detail)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
