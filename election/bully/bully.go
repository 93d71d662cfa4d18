// Package bully is the Garcia-Molina bully election as a pure
// election.Algorithm.
//
// On suspecting the leader a node sends Election to the two highest live
// members that outrank it, and to every other one above if neither answers
// (see firstWave). If any answers within the answer wait (see answerWait),
// or refuses the Election as overloaded (EventPeerBusy; see PeerBusy for
// the limit), it waits for a Coordinator, and starts again if none comes
// within the election timeout. If none above answers (or every send
// failed) it wins and announces itself. A node that gets an Election from
// a lower node answers, then runs its own after a tick for each live
// member above it, unless a Coordinator settles it first: the highest goes
// first, so an election costs O(n) messages, not the textbook's O(n^2).
package bully

import (
	"fmt"
	"slices"

	"github.com/electord/electord/election"
)

// Name is the algorithm's name in configuration.
const Name = "bully"

// New returns a bully node.
func New(cfg election.Config) (election.StateMachine, error) {
	return election.New(cfg, &Bully{})
}

type phase uint8

const (
	idle        phase = iota
	awaitAnswer       // Elections sent; waiting for an Answer
	awaitLeader       // answered; waiting for the Coordinator
	deferred          // a lower node's Election came: campaign after the rank delay
)

// Bully is the bully election procedure: an election.Algorithm and a
// MessageChecker. MsgAnswer and Config.AnswerTimeoutTicks are the bully's
// alone.
type Bully struct {
	phase      phase
	term       election.Term // the current attempt
	elapsed    int
	asked      []election.NodeID // every node sent an Election in this attempt
	wave       []election.NodeID // those of the last wave whose send has not failed
	widened    bool              // the second wave was sent (see firstWave)
	wait       int               // deferred: campaign once elapsed reaches it
	answerWait int               // awaitAnswer: widen or win once elapsed passes it (see answerWait)
	// busyOnly: this attempt waits for a Coordinator because a node above
	// refused an Election as overloaded, and none has answered.
	busyOnly bool
	// doubt: the last attempt waited on a busy node alone and no
	// Coordinator came, so this one counts Answers only (see PeerBusy).
	doubt bool
}

// Name implements election.Algorithm.
func (b *Bully) Name() string { return Name }

var (
	_ election.MessageChecker   = (*Bully)(nil)
	_ election.SuspicionDelayer = (*Bully)(nil)
	_ election.BusyObserver     = (*Bully)(nil)
)

// CheckMessage implements election.MessageChecker: an Election's initiator
// owns its term, and it carries none of the ring's fields (a ring node in a
// bully cluster, or a forgery).
func (b *Bully) CheckMessage(_ election.Host, m election.Message) string {
	if m.Type != election.MsgElection {
		return ""
	}
	if m.Initiator == 0 || !m.Term.OwnedBy(m.Initiator) {
		return fmt.Sprintf("initiator %d does not own term %v", m.Initiator, m.Term)
	}
	if len(m.Candidates) > 0 || m.MaxTerm != 0 || m.InitiatorRank != (election.Rank{}) {
		return "carries ring fields (candidates, max term or initiator rank) in a bully cluster"
	}
	return ""
}

// Reset implements election.Algorithm.
func (b *Bully) Reset() { b.phase, b.doubt = idle, false }

// Campaign implements election.Algorithm.
func (b *Bully) Campaign(h election.Host) { b.campaign(h, false) }

// campaign starts an attempt; doubt: busy refusals do not count in it.
func (b *Bully) campaign(h election.Host, doubt bool) {
	b.doubt, b.busyOnly = doubt, false
	self := h.Self()
	if st := h.Standing(); st.Excluded {
		// Resigning, or not standing: let the highest other member run the
		// election, not the one that just resigned to this node.
		ring := h.Ring()
		for i := len(ring) - 1; i >= 0; i-- {
			if ring[i].ID != self.ID && ring[i].ID != st.Resigned {
				h.Send(election.Message{Type: election.MsgTimeoutNow, To: ring[i].ID, Term: st.LeaderTerm, Elect: true})
				return
			}
		}
		return
	}
	b.term, b.asked, b.widened = h.NewAttempt(), b.asked[:0], false
	b.phase = awaitAnswer
	b.ask(h, firstWave)
}

// firstWave is how many of the live members above it a campaign asks
// first: the highest two, since the first may be the leader just lost,
// still listed until gossip declares it dead. Only if neither answers
// (each failed, or the answer wait passed) are the others above asked.
// The highest live node answers all the same, and the others above would
// only defer to it. Asking all at once, as the textbook does, has every
// node that campaigns send an Election to each node above it, most over new
// connections, while the highest survivor announces itself: on a loaded
// host that work delays every answer past the waits of the nodes below.
const firstWave = 2

// ask sends this attempt's Election to the highest n live members above
// this node not asked yet (every one, if n < 0), as the next wave, and
// wins if there was none.
func (b *Bully) ask(h election.Host, n int) {
	self, resigned := h.Self(), h.Standing().Resigned
	b.elapsed, b.wave = 0, b.wave[:0]
	ring := h.Ring()
	for i := len(ring) - 1; i >= 0 && self.Less(ring[i]) && n != 0; i-- {
		id := ring[i].ID
		if id == resigned || slices.Contains(b.asked, id) {
			continue // it resigned and will not answer, or it was asked
		}
		h.Send(election.Message{Type: election.MsgElection, To: id, Term: b.term, Initiator: self.ID, FromRank: self})
		b.asked, b.wave = append(b.asked, id), append(b.wave, id)
		n--
	}
	if len(b.wave) == 0 {
		b.win(h)
		return
	}
	b.answerWait = answerWait(h, election.RanksAbove(h))
}

// silence ends a wave that no node answered: every send failed, or the
// answer wait passed. The second wave asks the rest; after it, win.
func (b *Bully) silence(h election.Host) {
	if b.widened {
		b.win(h)
		return
	}
	b.widened = true
	b.ask(h, -1)
}

// answerWait is how long each wave of a campaign by a node with k live
// members above it waits for an Answer before it asks the rest, or wins:
// Config.AnswerTimeoutTicks and one tick more for every 8 nodes above (each
// Election needs its receiver's turn, and often a new connection: a fixed
// short wait lets a low node win and announce itself while the nodes above
// are alive but slow to answer); in a cluster's first election (no
// leadership ever known, so none to replace in a hurry) a tick more for
// every node above, up to the election timeout. It depends on k, not on the
// wave's size: an answer's delay grows with the load of all the nodes
// campaigning at once, which k measures, and a wait sized for a first wave
// of two ends while the nodes above are alive. An Election
// that fails (a refused connection: the node above is gone) counts at
// once, so a crash is won without waiting; the wait only decides for a
// node above that neither answers nor fails (paused, cut off, or slow).
func answerWait(h election.Host, k int) int {
	cfg := h.Config()
	if h.Standing().LeaderTerm == 0 {
		return max(cfg.AnswerTimeoutTicks, min(cfg.ElectionTimeoutTicks, cfg.AnswerTimeoutTicks+k))
	}
	return cfg.AnswerTimeoutTicks + k/8
}

func (b *Bully) win(h election.Host) {
	b.phase = idle
	h.Win(b.term)
}

// Step implements election.Algorithm.
func (b *Bully) Step(h election.Host, m election.Message) {
	switch m.Type {
	case election.MsgElection:
		b.stepElection(h, m)
	case election.MsgAnswer:
		if m.Term != b.term {
			return
		}
		switch b.phase {
		case awaitAnswer:
			b.phase, b.elapsed = awaitLeader, 0
		case awaitLeader:
			b.busyOnly = false
		}
	}
}

func (b *Bully) stepElection(h election.Host, m election.Message) {
	from, known := h.RankOf(m.From) // from membership, never the message
	if !known {
		return // the core refuses non-members; this guards
	}
	st, self := h.Standing(), h.Self()
	if !from.Less(self) || st.Excluded {
		return // only a lower node is answered; a resigning node stays silent
	}
	answer := election.Message{Type: election.MsgAnswer, To: m.From, Term: m.Term}
	switch {
	case st.Role == election.RoleLeader:
		// A lower node lost sight of this leader (it timed out, restarted,
		// or was cut off): answer, and tell it who leads, at the same term.
		// Its attempt's term is its own business: nodes report leadership
		// terms only, so a follower's campaign does not move the leader's.
		h.Send(answer)
		if m.Term > st.LeaderTerm { // not a late Election of the round that made it
			h.Send(election.Message{Type: election.MsgCoordinator, To: m.From, Term: st.LeaderTerm, Leader: self.ID, Confirmed: true})
		}
	case st.LeaderFresh || (st.Role == election.RoleFollower && m.Term.Epoch() <= st.LeaderTerm.Epoch()):
		// Our leader answered us just now, or the election is from the round
		// that made it: answer, and tell the sender who leads instead of
		// starting over. If the sender cannot reach that leader it times
		// out and tries again; by then we will have noticed too.
		h.Send(answer)
		h.Send(election.Message{Type: election.MsgCoordinator, To: m.From, Term: st.LeaderTerm, Leader: st.Leader, Confirmed: true})
		// But the sender has lost that leader, and this node may not have
		// noticed yet (no connection to it since a restart, a probe still
		// under way): ask the leader now rather than at the next heartbeat.
		// A leader whose process is gone refuses it, this node campaigns
		// at once and its announcement reaches the sender too. Without
		// this, every lower node sent back to a dead leader would wait for
		// this node's next heartbeat to find the crash.
		h.AskLeader()
	default:
		h.Send(answer)
		// A first start still waiting for the cluster to form answers (it
		// is alive and higher) but leaves the campaign to nodes that see
		// enough members: its own view may miss higher nodes.
		if b.phase != idle || st.Proposing || h.Bootstrapping() {
			return
		}
		// Every node the sender asked answers (the two highest above it,
		// then the rest if neither answered). Campaigning at once, as the
		// textbook bully does, has every one of them run its own election:
		// n(n-1)/2 Elections when the lowest node asks every node above. Instead each waits a
		// tick for each live node above it: the highest campaigns at once,
		// wins without a message to wait for, and its Coordinator reaches
		// the others while they wait, which settles them (Reset). A node
		// above that is gone costs the ones below it a tick each. The wait
		// has no cap: under a cap (half the election timeout, say), every
		// node below the cap's rank would end its wait on one tick whenever
		// the winner's Coordinator took longer, and run the n^2 storm after
		// all, which under load (Answers late) need not settle; a wait that
		// outlasts the sender's election timeout costs only the sender's
		// second campaign, which the waiting nodes answer.
		if d := election.RanksAbove(h); d > 0 {
			b.phase, b.elapsed, b.wait = deferred, 0, d
			return
		}
		b.Campaign(h)
	}
}

// SuspicionDelay implements election.SuspicionDelayer: after losing its
// leader, a node waits one tick for each live member that outranks it (the
// lost leader aside), with no cap. The highest survivor campaigns at once
// and usually announces itself before the next one's turn; a lower node
// that hears of an election or a leader meanwhile acts on it as usual. When
// all n nodes learn of a crash together, the election costs O(n) messages
// instead of O(n^2). Under a cap (a leader timeout, say), every node ranked
// below the cap would campaign on one tick whenever the highest survivor's
// announcement is still on its way over new connections, each sending
// Elections to the nodes above it, a storm that need not settle. The ring
// keeps the cap: its campaign is one message.
//
// Below the highest survivor the wait is longer by the highest survivor's
// head start (announceLead): the time its announcements take to go out.
// Without it, the nodes just below the highest campaign a few ticks after a
// crash, while its announcements are still going out over new connections;
// each of them that loses patience with a loaded node above wins and
// announces itself, and the load of those announcements starves everything
// else.
func (b *Bully) SuspicionDelay(h election.Host) int {
	above := election.RanksAbove(h)
	if above == 0 {
		return 0
	}
	return above + announceLead(h)
}

// announceLead is the head start, in ticks, that the highest survivor of a
// leader's loss gets before the nodes below it campaign: a tick for each
// other member (the announcements it has to send), at most one leader
// timeout. It delays a failover only when the highest survivor does not
// announce itself to a node: it is gone too, cannot reach that node, or
// still has the leader (only some followers lost it: a partial cut). Then
// that node waits this much more, so the cap keeps that recovery from
// growing with the cluster: a tick per member was 1.3 s at 128 members and
// 2.6 s at 256. A leader timeout (600 ms at the defaults) is what a
// follower already gives a silent leader, and longer than the highest
// survivor's 127 announcements took to arrive at 128 processes (at most
// 600 ms, most of it opening connections). The first election keeps its
// longer head start (coldLeadTicks): there every node's announcement opens
// its first connections while processes are still starting.
func announceLead(h election.Host) int {
	return min(len(h.Ring())-1, h.Config().LeaderTimeoutTicks)
}

// TicksUntilDue implements election.TickDuer: the answer wait, the election
// timeout, or the end of the wait before answering a lower node's Election
// with a campaign.
func (b *Bully) TicksUntilDue(h election.Host) int {
	cfg := h.Config()
	switch b.phase {
	case awaitAnswer:
		return max(1, b.answerWait-b.elapsed+1)
	case awaitLeader:
		return max(1, cfg.ElectionTimeoutTicks-b.elapsed+1)
	case deferred:
		return max(1, b.wait-b.elapsed)
	}
	return 0
}

// SkipTicks implements election.TickSkipper: an armed timer's count.
func (b *Bully) SkipTicks(k int) {
	if b.phase != idle {
		b.elapsed += k
	}
}

// Tick implements election.Algorithm.
func (b *Bully) Tick(h election.Host) {
	if b.phase == idle {
		return
	}
	b.elapsed++
	cfg := h.Config()
	switch {
	case b.phase == awaitAnswer && b.elapsed > b.answerWait:
		b.silence(h)
	case b.phase == awaitLeader && b.elapsed > cfg.ElectionTimeoutTicks:
		b.phase = idle
		b.campaign(h, b.busyOnly)
	case b.phase == deferred && b.elapsed >= b.wait:
		b.phase = idle
		// Not if this node leads or proposes by now, nor if its leader
		// answered it meanwhile (a follower's leader that had gone quiet
		// for half a timeout: the sender will hear of it from the leader's
		// Coordinator or its own next campaign).
		if st := h.Standing(); st.Role != election.RoleLeader && !st.Proposing && !st.LeaderFresh {
			b.Campaign(h)
		}
	}
}

// PeerBusy implements election.BusyObserver: an Election of this attempt
// that a higher node's process refused as overloaded (its inbox was full)
// counts as its Answer. The node is alive, and the bully's rule is that a
// live higher node ends a lower one's campaign. Taken as a failed send it
// would count as a death: after a crash the highest survivor's inbox fills
// with the Elections of the nodes below, and a node whose Election it
// refused would win while the survivor announces itself.
//
// A busy refusal buys one election timeout, not more: if no node above
// answered and no Coordinator came, the next attempt counts Answers only
// and wins on silence as the textbook bully does, since a node whose loop
// is wedged (its inbox full for good) would otherwise keep the cluster
// without a leader for as long as it lives.
func (b *Bully) PeerBusy(h election.Host, m election.Message) {
	if m.Type != election.MsgElection || b.phase != awaitAnswer || m.Term != b.term {
		return
	}
	if b.doubt {
		b.SendFailed(h, m) // as before busy refusals counted: a failed send
		return
	}
	b.phase, b.elapsed, b.busyOnly = awaitLeader, 0, true
}

// SendFailed implements election.Algorithm: when every Election of a wave
// failed, no one it asked is alive, so ask the rest, or win, without
// waiting.
func (b *Bully) SendFailed(h election.Host, m election.Message) {
	if m.Type != election.MsgElection || b.phase != awaitAnswer || m.Term != b.term {
		return
	}
	i := slices.Index(b.wave, m.To)
	if i < 0 {
		return // of the first wave, after the second was sent
	}
	b.wave = slices.Delete(b.wave, i, i+1)
	if len(b.wave) == 0 {
		b.silence(h)
	}
}
