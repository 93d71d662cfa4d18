package node

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/electord/electord/election"
)

// namedChangeLogEach: a loop pass that changes at most this many named
// leaderships logs one line per election; more are summed up per role and
// leader, with a few of their names, and logged one by one at debug. A
// node that fails over thousands of elections at once would otherwise
// write thousands of lines at info on the failover's path (each a write to
// the log, 5-30 µs here), and an operator reads the sum better anyway.
const (
	namedChangeLogEach   = 8
	namedChangeLogSample = 5
)

// namedChangeLog collects one loop pass's named leadership changes.
type namedChangeLog struct {
	names []string
	chs   []election.Leadership
}

func (l *namedChangeLog) add(name string, ch election.Leadership) {
	l.names = append(l.names, name)
	l.chs = append(l.chs, ch)
}

// flush logs the pass's changes (see namedChangeLogEach) and empties l.
func (l *namedChangeLog) flush(log *slog.Logger) {
	defer func() { l.names, l.chs = l.names[:0], l.chs[:0] }()
	if len(l.names) <= namedChangeLogEach {
		for i, name := range l.names {
			ch := l.chs[i]
			log.Info("named election: leadership changed", "election", name, "role", ch.Role.String(),
				"leader", uint64(ch.Leader), "term", ch.Term.String())
		}
		return
	}
	type key struct {
		role   election.Role
		leader election.NodeID
	}
	type group struct {
		n      int
		lo, hi election.Term
		sample []string
	}
	var order []key
	groups := map[key]*group{}
	for i, name := range l.names {
		ch := l.chs[i]
		log.Debug("named election: leadership changed", "election", name, "role", ch.Role.String(),
			"leader", uint64(ch.Leader), "term", ch.Term.String())
		k := key{ch.Role, ch.Leader}
		g := groups[k]
		if g == nil {
			g = &group{lo: ch.Term, hi: ch.Term}
			groups[k] = g
			order = append(order, k)
		}
		g.n++
		g.lo, g.hi = min(g.lo, ch.Term), max(g.hi, ch.Term)
		if len(g.sample) < namedChangeLogSample {
			g.sample = append(g.sample, name)
		}
	}
	for _, k := range order {
		g := groups[k]
		sample := strings.Join(g.sample, " ")
		if g.n > len(g.sample) {
			sample += fmt.Sprintf(" and %d more", g.n-len(g.sample))
		}
		terms := g.lo.String()
		if g.hi != g.lo {
			terms += ".." + g.hi.String()
		}
		log.Info("named elections: leadership changed", "elections", g.n, "role", k.role.String(),
			"leader", uint64(k.leader), "terms", terms, "names", sample)
	}
}
