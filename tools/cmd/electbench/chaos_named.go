package main

import (
	"fmt"
	"maps"
	"slices"

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
