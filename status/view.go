package status

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
)

// View is what the page shows: one node's view of the cluster, with every
// live member's own answer to "who leads".
type View struct {
	Self      election.NodeID
	SelfName  string
	Algorithm string
	Killed    bool
	Fault     string
	// NotStanding says why this node is no candidate in the default
	// election ("" while it is one): its candidate probe fails.
	NotStanding string
	// Leader is who leads as the serving node sees it.
	Leader      LeaderView
	HighestTerm TermView
	// Ring is the live members in ring order (ascending rank: each passes
	// an election to the next, the last back to the first), then the dead.
	Ring []Member
	// Bully is the members by bully rank: the highest (priority, then id)
	// first, the one an election ends with.
	Bully []Member
	// Disagree: live members that answered name different leaders or
	// terms. Majority is the view most of them share.
	Disagree bool
	Majority string
	// Live is how many members are alive (this node included); Askable
	// how many of them could be asked (this node included): a member
	// whose api address is loopback on another host (or this node's own
	// address) is not asked, as asking it would ask this node.
	Live, Askable int
	// Timeline is the serving node's leader changes, newest first.
	Timeline []Change
	// Elections are the last elections the serving node took part in,
	// newest first.
	Elections []Election
	// Named is the first named elections by name, and how many there are.
	Named NamedView
}

// Unasked is how many live members were not asked (see notAsked).
func (v View) Unasked() int { return v.Live - v.Askable }

// TermView is a term both ways: the human form (epoch.slot) and the
// integer fencing token.
type TermView struct {
	Human string `json:"human"` // "21.5"
	Token uint64 `json:"token"` // 1376261
}

func termView(t election.Term) TermView { return TermView{Human: t.String(), Token: uint64(t)} }

// LeaderView is who leads and since when.
type LeaderView struct {
	Known bool
	ID    election.NodeID
	Name  string
	Term  TermView
	Since time.Time // when the serving node learned of it
	State string    // the serving node's state
}

// Member is one member's row.
type Member struct {
	ID       election.NodeID
	Name     string
	Priority int64
	APIAddr  string
	Self     bool
	// Position: 1-based place in the ring (0: not in it, dead), or the
	// bully rank (1 = the highest).
	Position int
	// Liveness: alive (gossip says so and it answered), dead (gossip),
	// killed (electctl kill), suspect (gossip says alive, it did not answer).
	Liveness string
	Why      string // why suspect: the error asking it
	// NotAsked says why a live member was not asked ("" when it was):
	// its api address would reach this node, not it (see notAsked).
	NotAsked string
	Role     string // its own state when it answered (leader, follower, electing, no_leader), else this node's guess, "" if none
	// Sees is the leader it names when asked ("" when not asked or no answer).
	Sees     string
	SeesID   election.NodeID
	SeesTerm TermView
	Answered bool
	Differs  bool // it answered and names another leader or term than the majority
}

// Change is one leader change.
type Change struct {
	At     time.Time
	Leader election.NodeID
	Term   TermView
	Role   string
	Cause  string
	New    bool // the term differs from the change before it
}

// Election is one election the node took part in.
type Election struct {
	Started  time.Time
	Took     time.Duration // 0 while it runs
	Running  bool
	Cause    string
	Term     TermView
	Leader   election.NodeID
	Won      bool
	Messages uint64
}

// answer is what a member said when asked who leads.
type answer struct {
	leader election.NodeID
	term   election.Term
	state  string
	err    error
}

// asker asks a member who it thinks leads; it returns the answer or why
// there is none. Called concurrently.
type asker interface {
	ask(ctx context.Context, id election.NodeID, addr string) answer
	// endRound is called after each view's asks: an asker that keeps
	// connections closes the ones that view did not use.
	endRound()
}

// maxAsks bounds the members asked at once: a page on a large cluster
// asks them in waves rather than all together.
const maxAsks = 32

// build assembles the view: n's status, timeline and elections, and the
// answer of every live member (asked concurrently, at most maxAsks at a
// time, each within timeout).
func build(ctx context.Context, n *node.Node, a asker, timeout time.Duration) View {
	st := n.Status()
	li := st.Leader
	v := View{Self: st.Self, Algorithm: st.Algorithm, Killed: st.Killed, Fault: st.Fault, HighestTerm: termView(st.Term),
		Leader: LeaderView{Known: li.HasLeader(), ID: li.ID, Name: li.Name, Term: termView(li.Term), Since: li.Since, State: li.State}}
	if why := st.NotStanding(); why != "" {
		v.NotStanding = "not standing: " + why
	}

	var me node.MemberInfo
	for _, m := range st.Members {
		if m.ID == st.Self {
			me = m
		}
	}
	answers := make([]answer, len(st.Members))
	unasked := make([]string, len(st.Members))
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxAsks)
	for i, m := range st.Members {
		if m.Alive || m.ID == st.Self {
			v.Live++
		}
		switch {
		case m.ID == st.Self:
			v.Askable++
			v.SelfName = m.Name
			if !st.Killed {
				answers[i] = answer{leader: li.ID, term: li.Term, state: li.State}
			} else {
				answers[i] = answer{err: node.ErrKilled}
			}
		case !m.Alive:
		case m.APIAddr == "":
			answers[i] = answer{err: fmt.Errorf("no api address known")}
		case notAsked(m, me) != "":
			unasked[i] = notAsked(m, me)
		default:
			v.Askable++
			wg.Go(func() {
				slots <- struct{}{}
				defer func() { <-slots }()
				actx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				answers[i] = a.ask(actx, m.ID, m.APIAddr)
			})
		}
	}
	wg.Wait()
	a.endRound()

	rows := make([]Member, len(st.Members))
	for i, m := range st.Members {
		r := Member{ID: m.ID, Name: m.Name, Priority: m.Priority, APIAddr: m.APIAddr, Self: m.ID == st.Self, Role: m.Role}
		ans := answers[i]
		switch {
		case r.Self && st.Killed:
			r.Liveness, r.Role = "killed", ""
		case !m.Alive:
			r.Liveness, r.Role = "dead", ""
		case unasked[i] != "":
			// Gossip says alive; nothing more is known. Neutral: not
			// suspect, not in the majority.
			r.Liveness, r.NotAsked = "alive", unasked[i]
		case ans.err != nil:
			r.Liveness, r.Why = "suspect", ans.err.Error()
			if killedErr(ans.err) {
				r.Liveness, r.Role = "killed", ""
			}
		default:
			r.Liveness, r.Role, r.Answered = "alive", ans.state, true
			r.SeesID, r.SeesTerm = ans.leader, termView(ans.term)
			r.Sees = "none"
			if ans.leader != 0 {
				r.Sees = fmt.Sprintf("node %d", ans.leader)
			}
		}
		rows[i] = r
	}
	v.Disagree, v.Majority = mark(rows, st.Self)

	rank := func(a, b Member) int {
		return election.Rank{Priority: a.Priority, ID: a.ID}.Compare(election.Rank{Priority: b.Priority, ID: b.ID})
	}
	inRing := func(m Member) bool { return m.Liveness != "dead" && m.Liveness != "killed" }
	v.Ring = slices.Clone(rows)
	slices.SortStableFunc(v.Ring, func(a, b Member) int {
		if ia, ib := inRing(a), inRing(b); ia != ib {
			if ia {
				return -1
			}
			return 1
		}
		return rank(a, b)
	})
	pos := 0
	for i := range v.Ring {
		if inRing(v.Ring[i]) {
			pos++
			v.Ring[i].Position = pos
		}
	}
	v.Bully = slices.Clone(rows)
	slices.SortStableFunc(v.Bully, func(a, b Member) int { return rank(b, a) })
	for i := range v.Bully {
		v.Bully[i].Position = i + 1
	}

	tl := n.Timeline()
	v.Timeline = make([]Change, len(tl))
	for i, c := range tl {
		v.Timeline[len(tl)-1-i] = Change{At: c.At, Leader: c.Leader, Term: termView(c.Term), Role: c.Role, Cause: c.Cause,
			New: i == 0 || tl[i-1].Term != c.Term}
	}
	v.Named, _ = namedView(n, node.ElectionQuery{}) // the zero query: the first page, valid
	els := n.Elections()
	v.Elections = make([]Election, len(els))
	for i, e := range els {
		v.Elections[len(els)-1-i] = Election{Started: e.Started, Took: e.Duration(), Running: e.Ended.IsZero(), Cause: e.Cause,
			Term: termView(e.Term), Leader: e.Leader, Won: e.Won, Messages: e.Messages}
	}
	return v
}

// notAsked says why member m is not asked who leads, "" if it can be: its
// api address is loopback while m runs on another host (its peer address
// is neither loopback nor on this node's host), or it is this node's own
// api address. Dialling such an address reaches this node's own API, whose
// answer would always agree. In Kubernetes with the API bound to
// 127.0.0.1 every member advertises 127.0.0.1:7070. A dev cluster (every
// node on this host, peer addresses loopback too) is asked as usual.
func notAsked(m, me node.MemberInfo) string {
	host := func(addr string) string {
		h, _, err := net.SplitHostPort(addr)
		if err != nil {
			return addr
		}
		return h
	}
	loopback := func(h string) bool {
		if ip := net.ParseIP(h); ip != nil {
			return ip.IsLoopback()
		}
		return strings.EqualFold(h, "localhost") || strings.HasSuffix(strings.ToLower(h), ".localhost")
	}
	sameHost := loopback(host(m.PeerAddr)) || (me.PeerAddr != "" && host(m.PeerAddr) == host(me.PeerAddr))
	switch {
	case loopback(host(m.APIAddr)) && !sameHost:
		return "its api address is loopback"
	case me.APIAddr != "" && m.APIAddr == me.APIAddr:
		return "its api address is this node's own"
	}
	return ""
}

// mark flags the rows that answered with another view than the majority's
// (ties go to the serving node's own view) and says whether any did.
func mark(rows []Member, self election.NodeID) (bool, string) {
	type key struct {
		id   election.NodeID
		term election.Term
	}
	votes := map[key]int{}
	var mine key
	var keys []key
	for _, r := range rows {
		if !r.Answered {
			continue
		}
		k := key{r.SeesID, election.Term(r.SeesTerm.Token)}
		if votes[k] == 0 {
			keys = append(keys, k)
		}
		votes[k]++
		if r.ID == self {
			mine = k
		}
	}
	if len(keys) == 0 {
		return false, ""
	}
	best := keys[0]
	for _, k := range keys[1:] {
		if c := cmp.Compare(votes[k], votes[best]); c > 0 || (c == 0 && k == mine) {
			best = k
		}
	}
	for i := range rows {
		r := &rows[i]
		r.Differs = r.Answered && (key{r.SeesID, election.Term(r.SeesTerm.Token)}) != best
	}
	maj := "no leader"
	if best.id != 0 {
		maj = fmt.Sprintf("node %d", best.id)
	}
	return len(keys) > 1, fmt.Sprintf("%s, term %v (token %d), named by %d of %d answering members",
		maj, best.term, uint64(best.term), votes[best], countAnswered(rows))
}

func countAnswered(rows []Member) int {
	n := 0
	for _, r := range rows {
		if r.Answered {
			n++
		}
	}
	return n
}
