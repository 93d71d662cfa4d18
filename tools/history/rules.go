package history

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"
)

// Rule names, as violations carry them.
const (
	RuleOneLeaderPerTerm = "one-leader-per-term" // two nodes named leader of one term, or a term led by a node that cannot own it
	RuleTermMonotonic    = "term-monotonic"      // a node's term went down (restarts included)
	RuleTwoClaims        = "two-claims"          // quorum: two nodes answered /leader/self 200 at overlapping moments
	RuleMinorityClaim    = "minority-claim"      // quorum: a node that cannot reach a majority claims after the grace
	RuleMinorityLeader   = "minority-leader"     // quorum: a node that cannot reach a majority names a leader after the grace
	RuleHealAgreement    = "heal-agreement"      // no agreed leader within AgreeMax of a heal
	RuleCalm             = "follower-fault"      // a fault of followers only changed the leader
	RuleWithdrawnLeads   = "withdrawn-leads"     // named: a node claims an election after its app withdrew, past WithdrawnMax
	RuleDeadCandidate    = "dead-candidate"      // named: the leader agreed after a heal has no app standing
)

// DefaultWithdrawnMax is how long a node may go on claiming a named
// election after its app's stream ended (the app killed), counted while the
// node runs: the node sees the socket close at once and hands over, and the
// known lag (the loop publishes the withdrawal after the synced write that
// drops the election's record, tens of ms on a loaded host) is far below
// it; the rest is the observer's poll and a loaded host's scheduling, as in
// DefaultGrace.
const DefaultWithdrawnMax = 1200 * time.Millisecond

// Unkinded is the per-kind key of heals recorded without a kind or a
// description.
const Unkinded = "(unnamed)"

// DefaultGrace covers electord's default timings: a cut-off follower names
// its leader until it suspects it, at most the heartbeat timeout plus its
// jitter (600 ms + 150 ms) after the last answer, which came up to one
// heartbeat interval (200 ms) before the cut; plus the observer's poll and
// scheduling. At 1 s (set for the 50 ms / 250 ms timings before) the long
// runs found nodes naming their leader 1,004-1,017 ms after a cut.
const DefaultGrace = 1200 * time.Millisecond

// healSlack is how long before a heal's stamp an answer may already see
// the heal (the rules go in parallel; the stamp follows the last).
const healSlack = 100 * time.Millisecond

// Config is what Check needs to know about the cluster.
type Config struct {
	Nodes  int
	Quorum int // --quorum; 0 = off: the quorum rules do not apply
	// Grace is how long after a node loses its majority it may still claim
	// or name a leader; 0 = DefaultGrace.

	Grace time.Duration
	// AgreeMax is the longest a heal may take to agreement; 0 = 5s.
	AgreeMax time.Duration
	// SlotBits is how many low bits of a term name its owner (election.SlotBits).
	SlotBits uint
	// Named judges a named election's history: the terms of term-monotonic
	// are those of answers that name a leader (a node that knows no leader
	// of an election, an observer that saw its leader withdraw or a node
	// restarted without its app, has no term of it to report), and the
	// candidacies recorded (History.Apps) add withdrawn-leads and
	// dead-candidate.
	Named bool
	// WithdrawnMax: see DefaultWithdrawnMax; 0 = that.
	WithdrawnMax time.Duration
	// Settle is how long after the network became whole (every node up,
	// no link cut) an overlap that begins still belongs to the fault just
	// healed: a cut-off node's round, its messages lost in the cut, can
	// end after the heal with a claim the incumbent then overrules.
	// Overlaps begun later are counted as calm (Report.OverlapsCalm).
	Settle time.Duration
}

// Violation is one broken rule.
type Violation struct {
	At     time.Time
	Rule   string
	Detail string
}

// WholeMark ends the Detail of an Overlap that began while every node was
// up and no link was cut.
const WholeMark = "every node up and no link cut when it began"

// Report is what Check found.
type Report struct {
	Start      time.Time
	Violations []Violation
	// HealTimes are the heal-to-agreement durations of the heals that
	// reached agreement, in order; Unhealed counts those that did not.
	HealTimes []time.Duration
	Unhealed  int
	Heals     int
	// ByKind splits the heal figures by Heal.Kind (What when Kind is
	// empty), so that one kind's slow heals are not averaged away.
	ByKind map[string]*KindHeals
	// Calms counts the follower-only faults judged; LeaderChanges those
	// after which the agreed leader was another node.
	Calms, LeaderChanges int
	Obs, Errs            int // answers recorded, and requests that got none
	Claims               int
	// Overlaps are, without quorum, the episodes in which two nodes
	// claimed at overlapping moments: plain mode promises no single
	// claimant (a cut-off side elects its own leader), so they are
	// reported here and are not violations.
	Overlaps []Violation
	// OverlapsWhole counts the Overlaps that began while every node was
	// up and no link was cut (a resumed or restarted node's stale claim,
	// or a handover's).
	OverlapsWhole int
	// OverlapsCalm counts the OverlapsWhole that began Config.Settle or
	// more after the network became whole: two claims that no fault just
	// healed explains.
	OverlapsCalm int
	// Resolved counts, in quorum mode, the episodes in which two nodes'
	// claims overlapped by round trips ([Sent, Recv]) but not by the
	// nodes' own decision windows (Obs.Window): claims the windows show
	// were made at different instants, which round trips alone would
	// have judged two-claims.
	Resolved int
}

// KindHeals are the heal figures of one fault kind.
type KindHeals struct {
	Heals    int
	Times    []time.Duration // heal to agreement, of the heals that agreed
	Unhealed int
}

// Rules counts violations by rule.
func (r Report) Rules() map[string]int {
	m := map[string]int{}
	for _, v := range r.Violations {
		m[v.Rule]++
	}
	return m
}

// Format prints a violation with its time since the start of the history.
func (r Report) Format(v Violation) string {
	return fmt.Sprintf("%9.3fs %s: %s", v.At.Sub(r.Start).Seconds(), v.Rule, v.Detail)
}

// Check judges h against every rule.
func Check(cfg Config, h History) Report {
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.AgreeMax == 0 {
		cfg.AgreeMax = 5 * time.Second
	}
	if cfg.SlotBits == 0 {
		cfg.SlotBits = 16
	}
	if cfg.WithdrawnMax == 0 {
		cfg.WithdrawnMax = DefaultWithdrawnMax
	}
	obs := slices.Clone(h.Obs)
	sort.SliceStable(obs, func(i, j int) bool { return obs[i].Sent.Before(obs[j].Sent) })
	topo := slices.Clone(h.Topo)
	sort.SliceStable(topo, func(i, j int) bool { return topo[i].At.Before(topo[j].At) })
	r := Report{Heals: len(h.Heals), ByKind: map[string]*KindHeals{}, Calms: len(h.Calms)}
	switch {
	case len(topo) > 0:
		r.Start = topo[0].At
	case len(obs) > 0:
		r.Start = obs[0].Sent
	}
	for _, o := range obs {
		if o.Err != "" {
			r.Errs++
			continue
		}
		r.Obs++
		if o.Claim() {
			r.Claims++
		}
	}
	c := checker{cfg: cfg, obs: obs, topo: topo, r: &r}
	c.oneLeaderPerTerm()
	c.termMonotonic()
	if cfg.Quorum > 0 {
		n := len(r.Violations)
		c.twoClaims(false)
		byTrips := c.twoClaims(false)
		r.Violations = r.Violations[:n]
		r.Resolved = max(0, byTrips-c.twoClaims(true))
		c.minority()
	} else {
		n := len(r.Violations)
		_ = c.twoClaims(false)
		r.Overlaps = slices.Clone(r.Violations[n:])
		r.Violations = r.Violations[:n]
		for i, v := range r.Overlaps {
			if since, ok := c.wholeSince(v.At); ok {
				r.Overlaps[i].Detail += "; " + WholeMark
				r.OverlapsWhole++
				if v.At.Sub(since) >= cfg.Settle {
					r.OverlapsCalm++
				}
			}
		}
	}
	if cfg.Named {
		c.apps = slices.Clone(h.Apps)
		sort.SliceStable(c.apps, func(i, j int) bool { return c.apps[i].At.Before(c.apps[j].At) })
		c.withdrawnLeads()
	}
	c.heals(h.Heals)
	c.calms(h.Calms)
	sort.SliceStable(r.Violations, func(i, j int) bool { return r.Violations[i].At.Before(r.Violations[j].At) })
	return r
}

type checker struct {
	cfg  Config
	obs  []Obs // by Sent
	topo []Topology
	apps []App // by At (named elections)
	r    *Report
}

func (c *checker) add(at time.Time, rule, format string, a ...any) {
	c.r.Violations = append(c.r.Violations, Violation{At: at, Rule: rule, Detail: fmt.Sprintf(format, a...)})
}

// term prints a term as electord does: epoch.slot.
func (c *checker) term(t uint64) string {
	return fmt.Sprintf("%d.%d", t>>c.cfg.SlotBits, t&(1<<c.cfg.SlotBits-1))
}

func (c *checker) rel(t time.Time) string { return fmt.Sprintf("%.3fs", t.Sub(c.r.Start).Seconds()) }

// oneLeaderPerTerm: every answer that names a leader (a /leader 200, or a
// claim) names, for one term, always the same node, and that node owns
// the term (its low bits).
func (c *checker) oneLeaderPerTerm() {
	type first struct {
		id   uint64
		node int
		at   time.Time
	}
	seen := map[uint64]first{}
	reported := map[[2]uint64]bool{}
	for _, o := range c.obs {
		id := o.Leads()
		if id == 0 {
			continue
		}
		mask := uint64(1)<<c.cfg.SlotBits - 1
		if o.Term == 0 || o.Term&mask != id&mask {
			if k := [2]uint64{o.Term, id | 1<<63}; !reported[k] {
				reported[k] = true
				c.add(o.Sent, RuleOneLeaderPerTerm, "node %d (%v) names node %d leader of term %s, which node %d cannot own",
					o.Node, o.Kind, id, c.term(o.Term), id)
			}
		}
		f, ok := seen[o.Term]
		if !ok {
			seen[o.Term] = first{id, o.Node, o.Sent}
			continue
		}
		if f.id != id && !reported[[2]uint64{o.Term, id}] {
			reported[[2]uint64{o.Term, id}] = true
			c.add(o.Sent, RuleOneLeaderPerTerm, "term %s: node %d (%v) names node %d leader, node %d named node %d at %s",
				c.term(o.Term), o.Node, o.Kind, id, f.node, f.id, c.rel(f.at))
		}
	}
}

// termMonotonic: the terms one node reports never go down. One violation
// per drop (until the node's term is back at its maximum).
func (c *checker) termMonotonic() {
	type state struct {
		max    uint64
		maxAt  time.Time
		maxObs Obs
		inDrop bool
	}
	st := map[int]*state{}
	for _, o := range c.obs {
		if o.Err != "" || (c.cfg.Named && o.Leads() == 0) {
			continue
		}
		s := st[o.Node]
		if s == nil {
			s = &state{}
			st[o.Node] = s
		}
		switch {
		case o.Term >= s.max:
			s.max, s.maxAt, s.maxObs, s.inDrop = o.Term, o.Sent, o, false
		case !s.inDrop:
			s.inDrop = true
			c.add(o.Sent, RuleTermMonotonic, "node %d reports term %s (%s), after term %s at %s (%s)",
				o.Node, c.term(o.Term), describe(o), c.term(s.max), c.rel(s.maxAt), describe(s.maxObs))
		}
	}
}

// describe says what an answer was, briefly.
func describe(o Obs) string {
	switch {
	case o.Kind == Self:
		return fmt.Sprintf("/leader/self %d, state %s", o.Code, o.State)
	case o.Code == http.StatusOK:
		return fmt.Sprintf("/leader: node %d leads, state %s", o.ID, o.State)
	}
	return fmt.Sprintf("/leader: no leader, state %s", o.State)
}

// twoClaims: no two nodes claim at overlapping moments. Polling cannot see
// an instant, only that a node's answer was produced somewhere in a
// window: [Sent, Recv], or with exact (quorum mode) the node's own window
// (Obs.Window) where it gave one; two claims of different nodes whose
// windows overlap may have been made at the same instant, and count.
// Overlapping pairs of the same two nodes less than a second apart make
// one episode. With exact it also finds, by the nodes' windows, a claim
// made between two claims of another node's leadership (claimsInterleaved).
// It returns how many overlap episodes it found.
func (c *checker) twoClaims(exact bool) int {
	window := func(o Obs) (time.Time, time.Time) { return o.Sent, o.Recv }
	if exact {
		window = Obs.Window
	}
	var claims []Obs
	for _, o := range c.obs {
		if o.Claim() {
			claims = append(claims, o)
		}
	}
	start := func(o Obs) time.Time { f, _ := window(o); return f }
	end := func(o Obs) time.Time { _, t := window(o); return t }
	sort.SliceStable(claims, func(i, j int) bool { return start(claims[i]).Before(start(claims[j])) })
	eps := episodes{}
	var active []Obs
	for _, o := range claims {
		keep := active[:0]
		for _, a := range active {
			if !end(a).Before(start(o)) {
				keep = append(keep, a)
			}
		}
		active = keep
		for _, a := range active {
			if a.Node == o.Node {
				continue
			}
			e := eps.at(a, o, start(o))
			to := end(a)
			if end(o).Before(to) {
				to = end(o)
			}
			e.n++
			if to.After(e.to) {
				e.to = to
			}
			e.maxOverlap = max(e.maxOverlap, to.Sub(start(o)))
		}
		active = append(active, o)
	}
	for _, e := range eps.list {
		c.add(e.from, RuleTwoClaims, "nodes %d (term %s) and %d (term %s) both answered /leader/self 200 in overlapping intervals, %d times from %s to %s (%.0f ms; longest overlap %.1f ms)",
			e.a, c.term(e.terms[0]), e.b, c.term(e.terms[1]), e.n, c.rel(e.from), c.rel(e.to),
			float64(e.to.Sub(e.from).Microseconds())/1000, float64(e.maxOverlap.Microseconds())/1000)
	}
	if exact {
		c.claimsInterleaved(start, end)
	}
	return len(eps.list)
}

// claimsInterleaved (quorum mode): no node claims between two claims of
// another node's one leadership. A node's claims of one term, with no
// other answer of its own between them, are one leadership claimed
// throughout (a leadership is claimed from its lease's start to its end,
// once: a claim lost to the wall clock is not taken back at that term), so
// another node's claim decided between them, by windows that do not
// overlap, was made while it was claimed: two leaders at once, seen from
// three instants where the overlap rule needs one. Polling at intervals,
// it is the rule that sees an overlap longer than the polling period.
func (c *checker) claimsInterleaved(start, end func(Obs) time.Time) {
	answers := map[int][]Obs{} // per node, its /leader/self answers by start
	claims := map[int][]Obs{}  // per node, its claims by start
	for _, o := range c.obs {
		if o.Kind != Self || o.Err != "" {
			continue
		}
		answers[o.Node] = append(answers[o.Node], o)
		if o.Claim() {
			claims[o.Node] = append(claims[o.Node], o)
		}
	}
	for _, l := range [](map[int][]Obs){answers, claims} {
		for _, os := range l {
			sort.SliceStable(os, func(i, j int) bool { return start(os[i]).Before(start(os[j])) })
		}
	}
	eps := episodes{}
	for _, a := range slices.Sorted(maps.Keys(answers)) {
		var first Obs // the first claim of the run o belongs to
		inRun := false
		for _, o := range answers[a] {
			if !o.Claim() || !inRun || o.Term != first.Term {
				first, inRun = o, o.Claim()
				continue
			}
			for _, b := range slices.Sorted(maps.Keys(claims)) {
				if b == a {
					continue
				}
				bs := claims[b]
				k := sort.Search(len(bs), func(k int) bool { return start(bs[k]).After(end(first)) })
				if k == len(bs) || !end(bs[k]).Before(start(o)) {
					continue
				}
				e := eps.at(first, bs[k], start(o))
				e.n++
				e.to = start(o)
				if e.n == 1 {
					e.held, e.between, e.again = first, bs[k], o
				}
			}
		}
	}
	for _, e := range eps.list {
		c.add(e.from, RuleTwoClaims, "node %d answered /leader/self 200 at term %s (decided at %s) and again at that term (at %s), and node %d answered it 200 at term %s between them (at %s): both claimed at once, %d times until %s",
			e.held.Node, c.term(e.held.Term), c.rel(end(e.held)), c.rel(start(e.again)), e.between.Node, c.term(e.between.Term), c.rel(start(e.between)), e.n, c.rel(e.to))
	}
}

// episodes groups findings about one pair of nodes less than a second
// apart.
type episodes struct {
	list []*episode
	open map[[2]int]*episode
}

type episode struct {
	a, b       int
	from, to   time.Time
	n          int
	terms      [2]uint64 // of a and b
	maxOverlap time.Duration
	// claimsInterleaved: the first finding's claims: held's node claimed
	// it again after between's node claimed.
	held, between, again Obs
}

// at returns the episode of p and o's nodes that a finding at t belongs
// to, opening one if the last is more than a second old, with the terms
// of p and o.
func (s *episodes) at(p, o Obs, t time.Time) *episode {
	x, y := min(p.Node, o.Node), max(p.Node, o.Node)
	if s.open == nil {
		s.open = map[[2]int]*episode{}
	}
	e := s.open[[2]int{x, y}]
	if e == nil || t.Sub(e.to) > time.Second {
		e = &episode{a: x, b: y, from: t}
		s.list = append(s.list, e)
		s.open[[2]int{x, y}] = e
	}
	if p.Node == x {
		e.terms = [2]uint64{p.Term, o.Term}
	} else {
		e.terms = [2]uint64{o.Term, p.Term}
	}
	return e
}

// minoritySince returns, for node n at time t, since when n has been
// unable to reach a majority (both ways, up nodes, itself included)
// without interruption, and whether it is so at t.
func (c *checker) minoritySince(n int, t time.Time) (time.Time, bool) {
	i := sort.Search(len(c.topo), func(i int) bool { return c.topo[i].At.After(t) }) - 1
	if i < 0 {
		return time.Time{}, false
	}
	need := c.cfg.Quorum/2 + 1
	var since time.Time
	for ; i >= 0; i-- {
		if reach(c.topo[i], n) >= need {
			break
		}
		since = c.topo[i].At
	}
	return since, !since.IsZero()
}

// followsMajorityLeader reports whether, at t, n can talk with leader both
// ways and leader reaches a majority (both ways, itself included).
func (c *checker) followsMajorityLeader(n, leader int, t time.Time) bool {
	i := sort.Search(len(c.topo), func(i int) bool { return c.topo[i].At.After(t) }) - 1
	if i < 0 || leader <= 0 || leader >= len(c.topo[i].Up) || n >= len(c.topo[i].Up) {
		return false
	}
	tp := c.topo[i]
	return tp.Up[leader] && !tp.Cut[n][leader] && !tp.Cut[leader][n] && reach(tp, leader) >= c.cfg.Quorum/2+1
}

// reach counts the nodes n can talk with both ways, itself included.
func reach(t Topology, n int) int {
	if n >= len(t.Up) {
		return 0
	}
	k := 1
	for j := 1; j < len(t.Up); j++ {
		if j != n && t.Up[j] && !t.Cut[n][j] && !t.Cut[j][n] {
			k++
		}
	}
	return k
}

// minority: a node that has not been able to reach a majority for Grace
// neither claims nor names a leader. One violation per node per minority
// stretch and rule.
func (c *checker) minority() {
	reported := map[string]bool{}
	for _, o := range c.obs {
		if o.Err != "" || o.Leads() == 0 {
			continue
		}
		since, ok := c.minoritySince(o.Node, o.Sent)
		if !ok || o.Sent.Sub(since) < c.cfg.Grace {
			continue
		}
		if _, still := c.minoritySince(o.Node, o.Sent.Add(healSlack)); !still {
			// A heal was being applied: the harness removes the rules in
			// every namespace in parallel and stamps the heal when the last
			// is gone, so a node can hear its leader a few ms before the
			// stamp (found in CI: 22 ms before).
			continue
		}
		rule, what := RuleMinorityLeader, fmt.Sprintf("names node %d leader (term %s)", o.Leads(), c.term(o.Term))
		if o.Claim() || (o.Kind == Leader && o.Self) {
			rule, what = RuleMinorityClaim, fmt.Sprintf("claims leadership (term %s, %v)", c.term(o.Term), o.Kind)
		} else if c.followsMajorityLeader(o.Node, int(o.Leads()), o.Sent) {
			// A bridge: this node reaches only the middle node, which leads
			// and reaches a majority. Following the one leader a majority
			// backs is right (a Raft follower does the same).
			continue
		}
		k := fmt.Sprint(rule, o.Node, since.UnixNano())
		if reported[k] {
			continue
		}
		reported[k] = true
		c.add(o.Sent, rule, "node %d, without a majority since %s (%.0f ms before), %s", o.Node, c.rel(since),
			float64(o.Sent.Sub(since).Milliseconds()), what)
	}
}

// wholeSince reports whether every node was up and no link cut at t, and
// since when (the run's first topology, or the zero time before it).
func (c *checker) wholeSince(t time.Time) (time.Time, bool) {
	i := sort.Search(len(c.topo), func(i int) bool { return c.topo[i].At.After(t) }) - 1
	if i < 0 {
		return time.Time{}, true
	}
	if !wholeTopo(c.topo[i]) {
		return time.Time{}, false
	}
	for i > 0 && wholeTopo(c.topo[i-1]) {
		i--
	}
	return c.topo[i].At, true
}

func wholeTopo(tp Topology) bool {
	for n := 1; n < len(tp.Up); n++ {
		if !tp.Up[n] || slices.Contains(tp.Cut[n], true) {
			return false
		}
	}
	return true
}

// upAt returns the nodes up at t.
func (c *checker) upAt(t time.Time) []int {
	i := sort.Search(len(c.topo), func(i int) bool { return c.topo[i].At.After(t) }) - 1
	var up []int
	if i < 0 {
		for n := 1; n <= c.cfg.Nodes; n++ {
			up = append(up, n)
		}
		return up
	}
	for n := 1; n < len(c.topo[i].Up); n++ {
		if c.topo[i].Up[n] {
			up = append(up, n)
		}
	}
	return up
}

// agreementAfter replays the answers sent at or after since in the order
// the observer got them, until the up nodes agree, or the next fault (a
// topology change after since), whichever is first.
func (c *checker) agreementAfter(since time.Time) (Agreement, bool, time.Time) {
	nodes := c.upAt(since)
	end := time.Time{}
	if i := sort.Search(len(c.topo), func(i int) bool { return c.topo[i].At.After(since) }); i < len(c.topo) {
		end = c.topo[i].At
	}
	var after []Obs
	for _, o := range c.obs {
		if !o.Sent.Before(since) && (end.IsZero() || o.Recv.Before(end)) {
			after = append(after, o)
		}
	}
	sort.SliceStable(after, func(i, j int) bool { return after[i].Recv.Before(after[j].Recv) })
	latest := map[[2]int]Obs{}
	get := func(n int, k Kind) (Obs, bool) { o, ok := latest[[2]int{n, int(k)}]; return o, ok }
	for _, o := range after {
		latest[[2]int{o.Node, int(o.Kind)}] = o
		if a, ok := agreed(get, nodes, since); ok {
			return a, true, end
		}
	}
	return Agreement{}, false, end
}

// heals: after every heal, one leader is agreed by every up node within
// AgreeMax.
func (c *checker) heals(heals []Heal) {
	for _, h := range heals {
		kind := h.Kind
		if kind == "" {
			kind = h.What
		}
		if kind == "" {
			kind = Unkinded
		}
		kh := c.r.ByKind[kind]
		if kh == nil {
			kh = &KindHeals{}
			c.r.ByKind[kind] = kh
		}
		kh.Heals++
		a, ok, end := c.agreementAfter(h.At)
		if !ok {
			c.r.Unhealed++
			kh.Unhealed++
			until := "the end of the run"
			if !end.IsZero() {
				until = fmt.Sprintf("the next fault %.1f s later", end.Sub(h.At).Seconds())
			}
			c.add(h.At, RuleHealAgreement, "after %s healed, no agreed leader until %s; last answers: %s", h.What, until, c.lastViews(h.At, end))
			continue
		}
		if c.cfg.Named && !c.standing(int(a.Leader), a.At) {
			c.add(a.At, RuleDeadCandidate, "after %s healed, every node agreed on node %d (term %s), where no app stood",
				h.What, a.Leader, c.term(a.Term))
		}
		d := a.At.Sub(h.At)
		c.r.HealTimes = append(c.r.HealTimes, d)
		kh.Times = append(kh.Times, d)
		if d > c.cfg.AgreeMax {
			c.add(h.At, RuleHealAgreement, "after %s healed, agreement on node %d (term %s) took %.0f ms (max %v)",
				h.What, a.Leader, c.term(a.Term), float64(d.Milliseconds()), c.cfg.AgreeMax)
		}
	}
}

// lastViews describes each node's last /leader answer in [from, to).
func (c *checker) lastViews(from, to time.Time) string {
	last := map[int]Obs{}
	for _, o := range c.obs {
		if o.Kind == Leader && !o.Sent.Before(from) && (to.IsZero() || o.Sent.Before(to)) {
			last[o.Node] = o
		}
	}
	var parts []string
	for n := 1; n <= c.cfg.Nodes; n++ {
		o, ok := last[n]
		switch {
		case !ok:
			parts = append(parts, fmt.Sprintf("%d: none", n))
		case o.Err != "":
			parts = append(parts, fmt.Sprintf("%d: error", n))
		case o.Code != http.StatusOK:
			parts = append(parts, fmt.Sprintf("%d: no leader (term %s)", n, c.term(o.Term)))
		default:
			parts = append(parts, fmt.Sprintf("%d: node %d (term %s)", n, o.ID, c.term(o.Term)))
		}
	}
	return strings.Join(parts, ", ")
}

// keeps says whether an answer naming leader id at term t keeps calm k's
// leader. With quorum the term must not move: a bound node refuses a
// rival's round, so nothing raises the leader's term while it keeps its
// majority. In plain mode a cut-off node or minority elects itself at a
// higher term, and the leader the larger side kept following reasserts
// above it after the heal: the leader node stays, its term may rise.
func (c *checker) keeps(k Calm, id, t uint64) bool {
	if id != k.Leader {
		return false
	}
	if c.cfg.Quorum > 0 {
		return t == k.Term
	}
	return t >= k.Term
}

// calms: while a fault touches only followers, every other node keeps
// following the leader (at its term, with quorum), no other node claims,
// and after the fault the same leader is agreed (at the same term with
// quorum, at a term at least as high without).
func (c *checker) calms(calms []Calm) {
	for _, k := range calms {
		reported := map[int]bool{}
		for _, o := range c.obs {
			if o.Err != "" || o.Sent.Before(k.From) || o.Sent.After(k.To) || slices.Contains(k.Affected, o.Node) || reported[o.Node] {
				continue
			}
			bad := ""
			switch {
			case o.Kind == Leader && (o.Code != http.StatusOK || !c.keeps(k, o.ID, o.Term)):
				bad = fmt.Sprintf("answered /leader %d: leader %d term %s", o.Code, o.ID, c.term(o.Term))
			case o.Claim() && uint64(o.Node) != k.Leader:
				bad = fmt.Sprintf("claimed leadership at term %s", c.term(o.Term))
			case o.Kind == Self && uint64(o.Node) == k.Leader && !o.Claim():
				bad = fmt.Sprintf("(the leader) stopped claiming: /leader/self %d, state %q, term %s", o.Code, o.State, c.term(o.Term))
			}
			if bad != "" {
				reported[o.Node] = true
				c.add(o.Sent, RuleCalm, "during %s (nodes %v only; leader %d, term %s), node %d %s",
					k.What, k.Affected, k.Leader, c.term(k.Term), o.Node, bad)
			}
		}
		a, ok, _ := c.agreementAfter(k.To)
		if !ok {
			continue // heal-agreement reports it
		}
		if a.Leader != k.Leader {
			c.r.LeaderChanges++
		}
		if !c.keeps(k, a.Leader, a.Term) {
			c.add(a.At, RuleCalm, "after %s (nodes %v only), the agreed leader is node %d at term %s, was node %d at term %s",
				k.What, k.Affected, a.Leader, c.term(a.Term), k.Leader, c.term(k.Term))
		}
	}
}

// lastApp returns node n's last candidacy change at or before t.
func (c *checker) lastApp(n int, t time.Time) (App, bool) {
	var last App
	ok := false
	for _, a := range c.apps {
		if a.At.After(t) {
			break
		}
		if a.Node == n {
			last, ok = a, true
		}
	}
	return last, ok
}

// standing says whether an app of node n stood, or may have stood (it was
// starting), at t.
func (c *checker) standing(n int, t time.Time) bool {
	a, ok := c.lastApp(n, t)
	return ok && a.MayStand()
}

// upSince returns since when node n has been up (running, not paused)
// without interruption at t, and whether it is up at t. Before the first
// topology every node is up.
func (c *checker) upSince(n int, t time.Time) (time.Time, bool) {
	i := sort.Search(len(c.topo), func(i int) bool { return c.topo[i].At.After(t) }) - 1
	since := time.Time{}
	for ; i >= 0; i-- {
		tp := c.topo[i]
		if n >= len(tp.Up) || !tp.Up[n] {
			return since, !since.IsZero()
		}
		since = tp.At
	}
	return since, true
}

// withdrawnLeads: a node whose app no longer stands stops claiming the
// election within WithdrawnMax of the later of the app's end and the
// node's last start or resume (a stopped node cannot act on the closed
// stream). One violation per withdrawal. A node whose new app is starting
// may claim: its candidacy may be registered before the app says it
// stands (App.Starting).
func (c *checker) withdrawnLeads() {
	reported := map[App]bool{}
	for _, o := range c.obs {
		if !o.Claim() {
			continue
		}
		a, ok := c.lastApp(o.Node, o.Sent)
		if !ok || a.MayStand() || reported[a] {
			continue
		}
		from := a.At
		if up, isUp := c.upSince(o.Node, o.Sent); isUp && up.After(from) {
			from = up
		}
		if o.Sent.Sub(from) <= c.cfg.WithdrawnMax {
			continue
		}
		reported[a] = true
		c.add(o.Sent, RuleWithdrawnLeads, "node %d claims the election at term %s %.0f ms after its app stopped standing (at %s; counted from %s)",
			o.Node, c.term(o.Term), float64(o.Sent.Sub(a.At).Milliseconds()), c.rel(a.At), c.rel(from))
	}
}

// Percentile returns the p-th quantile (0..1) of ds, nearest rank.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
