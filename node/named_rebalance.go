package node

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
)

// Rebalancing of placement spread (docs/ELECTIONS.md, "Placement").
//
// A spread candidacy's rank makes each election's top-ranked live candidate
// the node the hash prefers, and the algorithms elect it whenever an
// election has no leader. But a leader keeps its leadership while it lives
// (sticky, without preempt): a node that comes back leads nothing, and
// whoever stood first in a new election leads it. So every node, at most
// once per interval, counts the leaderships of the spread elections it
// stands in per live candidate node; while the most is more than (1 +
// imbalance) times the least, it hands over up to batch of the elections it
// leads to the nodes below their even share, by the plan every node
// computes alike from the same counts (named.RebalancePlan), so two givers
// do not both fill one receiver. Each move is the per-election transfer:
// one TimeoutNow, the receiver leads at a new term, no leaderless gap
// beyond the handover. Among the elections it could give a receiver, a
// giver gives first those whose top-ranked live candidate the receiver is:
// a node that returns takes back the elections it led before it left.
//
// With preempt on, each election's leader already hands over to its
// top-ranked live candidate, and the rebalancer does not run: it would move
// leaderships that preemption moves straight back.

// SpreadConfig tunes the rebalancer (the spread-* keys; config.Default has
// their values). The zero value turns it off.
type SpreadConfig struct {
	// Imbalance (spread-imbalance): leaderships move while the most a
	// live candidate node leads is more than 1+Imbalance times the least.
	Imbalance float64
	// Interval (spread-rebalance-interval): how often a node may move.
	Interval time.Duration
	// Batch (spread-rebalance-batch): the most a node moves per interval;
	// 0: the rebalancer is off.
	Batch int
}

// check refuses a rebalancer that is on with a timing or threshold that is
// not positive, naming the field and its key.
func (s SpreadConfig) check() error {
	switch {
	case s.Batch < 0:
		return fmt.Errorf("node: Config.Spread.Batch (spread-rebalance-batch) must not be negative, got %d", s.Batch)
	case s.Batch == 0:
		return nil
	case s.Interval <= 0:
		return fmt.Errorf("node: Config.Spread.Interval (spread-rebalance-interval) must be positive, got %v", s.Interval)
	case !(s.Imbalance > 0):
		return fmt.Errorf("node: Config.Spread.Imbalance (spread-imbalance) must be positive, got %v", s.Imbalance)
	}
	return nil
}

// namedRebalance is the rebalancer's state, owned by the loop.
type namedRebalance struct {
	next time.Time // when it may look again
	// seen: each live candidate node counted since it last was not (it
	// joined, came back, or started standing), and when.
	seen map[election.NodeID]counted
	// moved counts the leaderships this node handed over to rebalance;
	// scans, the times it counted the leaderships (spreadCounts).
	moved, scans uint64
	// stale: something the counts depend on may have changed since the
	// last scan (a leadership, a candidacy, a machine, a member), or that
	// scan found the counts unsettled or a newcomer still settling. At
	// rest nothing changes, and a scan of every spread machine each
	// interval was most of an idle node's CPU at 10,000 elections.
	stale bool
	// unsettled: the election whose missing live leader ended the last
	// scan (spreadCounts), "" when it found the counts settled.
	unsettled string
}

// rebalanceStale marks the spread counts as worth a new scan.
func (s *namedState) rebalanceStale() { s.rebalance.stale = true }

// rebalanceNamed runs at the end of each loop pass, before its drain
// (afterNamed), and acts at most
// once per interval: the loop passes at least once per heartbeat interval
// while the node stands in any election (followers heartbeat, leaders are
// heartbeaten), so it acts within a heartbeat interval of falling due.
func (n *Node) rebalanceNamed() {
	cfg := n.cfg.Spread
	if cfg.Batch == 0 || n.cfg.Preempt || n.halted() || len(n.named.machines) == 0 {
		return
	}
	r := &n.named.rebalance
	if n.named.spreadSubs == 0 {
		// No election here asks for spread: a scan would count nothing
		// (isSpread), at O(elections) each interval.
		r.seen = nil
		return
	}
	now := time.Now()
	if !r.stale || now.Before(r.next) {
		return
	}
	r.next, r.stale = now.Add(cfg.Interval), false
	r.scans++
	counts, led, settled := n.spreadCounts()
	if !settled {
		// Nothing was counted: the nodes counted before keep when they
		// were first counted (a failover elsewhere does not make them
		// newcomers again), and one that is gone is a newcomer when back.
		for id := range r.seen {
			if !n.liveNode(id) {
				delete(r.seen, id)
			}
		}
		r.stale = true // look again next interval: the counts are about to change
		return
	}
	if n.settleNewcomers(counts, led, now) {
		r.stale = true
	}
	if len(led) == 0 || !named.Imbalanced(counts, cfg.Imbalance) {
		return
	}
	budget := cfg.Batch
	for _, mv := range named.RebalancePlan(counts, n.cfg.Self.ID) {
		for _, name := range n.spreadGifts(led, mv.To, min(mv.Count, budget)) {
			n.catchUpNamed()
			if err := n.named.machines[name].sm.Transfer(mv.To); err != nil {
				n.log.Debug("named election: rebalancing handover refused", "election", name, "to", uint64(mv.To), "err", err)
				continue
			}
			n.named.touch(name)
			r.moved++
			budget--
		}
		if budget == 0 {
			break
		}
	}
}

// counted is when the rebalancer first counted a node (since), and when
// it first found every leadership here hearing it (heard; zero: not yet,
// or not since a scan found one that did not).
type counted struct{ since, heard time.Time }

// settleNewcomers leaves out of counts the nodes that may not take a
// handover yet, and reports whether it left one out. A node that comes
// back, or starts standing, has machines that have not heard their leaders
// yet, and a machine refuses a TimeoutNow from a node it does not know as
// its leader: a handover then would leave the election without a leader
// until the giver's handover wait ran out. Within a leader timeout every
// leader has announced itself to it; a second is the margin. And until
// every leadership here in an election it stands in hears it (led, by
// heardInAll), it is still taking in its elections (at 10,000 a returning
// node agrees seconds after it restarts): a handover waits behind that
// work in its inbox, and the election shows no leader on the giver's node
// meanwhile. A leader timeout after that, the tells of the leaders' new
// support that hearing it again set off have passed too. A newcomer that
// some leadership here still does not hear after newcomerWait leader
// timeouts (its view of that election differs) is counted all the same,
// so that one election cannot hold the rebalance back for good.
func (n *Node) settleNewcomers(counts map[election.NodeID]int, led []string, now time.Time) (pending bool) {
	r := &n.named.rebalance
	if r.seen == nil {
		r.seen = map[election.NodeID]counted{}
	}
	for id := range r.seen {
		if _, ok := counts[id]; !ok {
			delete(r.seen, id)
		}
	}
	timeout := n.cfg.HeartbeatTimeout
	for id := range counts {
		c, ok := r.seen[id]
		if !ok {
			c.since = now
		}
		settled := true
		switch age := now.Sub(c.since); {
		case id == n.cfg.Self.ID || age >= newcomerWait*timeout:
		case age < 2*timeout:
			settled = false
		case !n.heardInAll(led, id):
			c.heard, settled = time.Time{}, false
		default:
			if c.heard.IsZero() {
				c.heard = now
			}
			settled = now.Sub(c.heard) >= timeout
		}
		r.seen[id] = c
		if !settled {
			delete(counts, id)
			pending = true
		}
	}
	return pending
}

// newcomerWait: how many leader timeouts a newcomer waits at most to be
// heard by every leadership here before it takes handovers (settleNewcomers):
// 6 s at the defaults, where a returning node agrees on 10,000 elections
// within 2–6 s.
const newcomerWait = 10

// heardInAll reports whether every election in led in which node id stands
// hears it (its machine follows this node's leadership at its term).
func (n *Node) heardInAll(led []string, id election.NodeID) bool {
	for _, name := range led {
		if _, ok := n.named.table.Get(name, id); !ok {
			continue
		}
		if nm := n.named.machines[name]; nm != nil && !nm.sm.hears(id) {
			return false
		}
	}
	return true
}

// isSpread reports whether this node stands in name under placement spread
// (its candidacy there, the head of its queue, asked for it).
func (n *Node) isSpread(name string) bool {
	head, ok := n.named.queues.Head(name)
	if !ok {
		return false
	}
	c := n.named.subs[head.ID]
	return c != nil && c.Placement == PlacementSpread
}

// liveNode reports whether id is this node or a member gossip holds alive.
func (n *Node) liveNode(id election.NodeID) bool {
	if id == n.cfg.Self.ID {
		return true
	}
	rec := n.members[id]
	return rec != nil && rec.alive
}

// spreadCounts counts, over the spread elections this node stands in, the
// leaderships of every live node that stands in any of them (0 for one
// that leads none), and lists the ones this node leads. settled is false
// while one of them has no live leader in this node's view: a failover or
// a handover is under way, the counts are about to change, and a plan made
// from them would move leaderships the failover is placing anyway.
//
// A scan of every election takes milliseconds at thousands, and the loop
// does nothing else meanwhile: a mass failover's scans, one each interval,
// would delay its last elections. So the election that left the last scan
// unsettled is looked at first, and while it stays so the scan ends there;
// and an election's candidates are looked up only until every live node is
// counted.
func (n *Node) spreadCounts() (counts map[election.NodeID]int, led []string, settled bool) {
	r := &n.named.rebalance
	if name := r.unsettled; name != "" {
		r.unsettled = ""
		if nm := n.named.machines[name]; nm != nil && n.isSpread(name) && !n.ledByLiveNode(nm.sm.Status()) {
			r.unsettled = name
			return nil, nil, false
		}
	}
	live := 1 // this node, and the members gossip holds alive
	for _, rec := range n.members {
		if rec.alive {
			live++
		}
	}
	counts = map[election.NodeID]int{n.cfg.Self.ID: 0}
	for name, nm := range n.named.machines {
		if !n.isSpread(name) {
			continue
		}
		if len(counts) < live {
			for _, m := range n.named.table.Members(name) {
				if _, ok := counts[m.ID]; !ok && n.liveNode(m.ID) {
					counts[m.ID] = 0
				}
			}
		}
		st := nm.sm.Status()
		if !n.ledByLiveNode(st) {
			r.unsettled = name
			return nil, nil, false
		}
		counts[st.Leader]++
		if st.Role == election.RoleLeader {
			led = append(led, name)
		}
	}
	return counts, led, true
}

// ledByLiveNode: a machine of status st follows or is a live leader.
func (n *Node) ledByLiveNode(st election.Status) bool {
	return st.Leader != 0 && n.liveNode(st.Leader)
}

// spreadGifts picks up to k of the elections this node leads (led) to hand
// to node to: those in which to stands, is alive, and has the highest
// priority of the live candidates (a move never puts an app of lower
// priority ahead of a higher one); first those whose top-ranked live
// candidate to is, then by name.
func (n *Node) spreadGifts(led []string, to election.NodeID, k int) []string {
	if k <= 0 || !n.liveNode(to) {
		return nil
	}
	type gift struct {
		name      string
		preferred bool
	}
	var gifts []gift
	for _, name := range led {
		st, ok := n.named.table.Get(name, to)
		if !ok {
			continue
		}
		head, _ := n.named.queues.Head(name)
		top := election.Rank{Priority: head.Priority, ID: n.cfg.Self.ID}
		for _, m := range n.named.table.Members(name) {
			if r := m.Rank(); n.liveNode(m.ID) && top.Less(r) {
				top = r
			}
		}
		if spreadPriority(st.Priority) < spreadPriority(top.Priority) {
			continue
		}
		gifts = append(gifts, gift{name, top.ID == to})
	}
	slices.SortFunc(gifts, func(a, b gift) int {
		if a.preferred != b.preferred {
			if a.preferred {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.name, b.name)
	})
	out := make([]string, 0, min(k, len(gifts)))
	for _, g := range gifts[:min(k, len(gifts))] {
		out = append(out, g.name)
	}
	return out
}
