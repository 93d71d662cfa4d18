package election_test

import (
	"maps"
	"testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/bully"
	"github.com/electord/electord/election/ring"
)

// quietCfg is node id's config with members 1..3 and a host that vouches
// for whoever *v says.
func quietCfg(id election.NodeID, v *map[election.NodeID]bool) election.Config {
	cfg := election.Config{ID: id, HeartbeatTicks: 2, LeaderTimeoutTicks: 10, QuietHeartbeatTicks: 40,
		Vouched: func(m election.NodeID) bool { return (*v)[m] }}
	for p := election.NodeID(1); p <= 3; p++ {
		if p != id {
			cfg.Peers = append(cfg.Peers, election.Member{ID: p})
		}
	}
	return cfg
}

// quietLeader is node 3, leading at tick 0, its heartbeat from members 1
// and 2 heard, with a host that vouches for whoever *v says.
func quietLeader(t *testing.T, v *map[election.NodeID]bool) election.StateMachine {
	t.Helper()
	sm, err := bully.New(quietCfg(3, v))
	if err != nil {
		t.Fatal(err)
	}
	sm.Campaign()
	st := sm.Status()
	if st.Role != election.RoleLeader {
		t.Fatalf("the highest node campaigned: %+v", st)
	}
	for _, id := range []election.NodeID{1, 2} {
		if err := sm.Step(election.Message{Type: election.MsgHeartbeat, From: id, To: 3, Term: st.LeaderTerm, Leader: 3}); err != nil {
			t.Fatal(err)
		}
	}
	return sm
}

// announced ticks sm k times and returns the support its announcements
// told each member (the last one's).
func announced(sm election.StateMachine, k int) map[election.NodeID]uint32 {
	to := map[election.NodeID]uint32{}
	for range k {
		sm.Tick()
		for _, m := range sm.Ready().Messages {
			if m.Type == election.MsgCoordinator {
				to[m.To] = m.Support
			}
		}
	}
	return to
}

// countSent ticks sm k times (as Advance would where it may) and counts the
// messages of type typ it sends.
func countSent(sm election.StateMachine, k int, typ election.MsgType) int {
	n := 0
	for range k {
		sm.Tick()
		for _, m := range sm.Ready().Messages {
			if m.Type == typ {
				n++
			}
		}
	}
	return n
}

// announcedFollower is node 1, following node 3 by its announcement at
// its first term, not yet answered, with a host that vouches for whoever
// *v says.
func announcedFollower(t *testing.T, v *map[election.NodeID]bool) (election.StateMachine, election.Term) {
	t.Helper()
	sm, err := bully.New(quietCfg(1, v))
	if err != nil {
		t.Fatal(err)
	}
	lead := election.NextTerm(0, 3)
	if err := sm.Step(election.Message{Type: election.MsgCoordinator, From: 3, To: 1, Term: lead, Leader: 3, Confirmed: true}); err != nil {
		t.Fatal(err)
	}
	sm.Ready()
	return sm, lead
}

// A follower whose leader the host vouches for, and which its leader has
// answered once, heartbeats once a quiet interval and never times the
// leader out, though no answer comes; when
// the host stops vouching, it asks the leader at once and times it out a
// leader timeout (and its jitter) later, as without Vouched.
func TestQuietFollowerHeartbeatsOncePerQuietInterval(t *testing.T) {
	v := map[election.NodeID]bool{3: true}
	sm, lead := announcedFollower(t, &v)
	// It goes quiet once its leader answered it in this leadership.
	if got := countSent(sm, 2, election.MsgHeartbeat); got != 1 {
		t.Fatalf("a new follower sent %d heartbeats in a heartbeat interval, want 1", got)
	}
	if err := sm.Step(election.Message{Type: election.MsgHeartbeatResp, From: 3, To: 1, Term: lead, Leader: 3, Support: 3}); err != nil {
		t.Fatal(err)
	}
	if got := countSent(sm, 400, election.MsgHeartbeat); got < 9 || got > 10 {
		t.Fatalf("quiet for 400 ticks (a quiet interval of 40): %d heartbeats, want 9 or 10", got)
	}
	if st := sm.Status(); st.Role != election.RoleFollower || st.Leader != 3 {
		t.Fatalf("a quiet follower unanswered for 400 ticks: %+v, want it following 3", st)
	}
	if due := sm.(interface{ TicksUntilDue() int }).TicksUntilDue(); due < 1 || due > 40 {
		t.Fatalf("a quiet follower is due in %d ticks, want 1..40", due)
	}
	v[3] = false
	if got := countSent(sm, 1, election.MsgHeartbeat); got != 1 {
		t.Fatalf("the tick after the host stopped vouching: %d heartbeats, want 1 (ask the leader at once)", got)
	}
	for i := range 30 {
		sm.Tick()
		sm.Ready()
		if sm.Status().Role != election.RoleFollower {
			if after := i + 2; after <= 10 {
				t.Fatalf("timed the leader out %d ticks after the host stopped vouching, want more than a leader timeout (10)", after)
			}
			return
		}
	}
	t.Fatal("an unvouched, silent leader was never timed out")
}

// A follower whose leader the host vouches for, and which its leader has
// not answered yet (its inbox refuses the heartbeats, busy), heartbeats
// every interval and does not time the leader out: the pair's heartbeats
// say the leader lives. Its first answer makes it quiet; when the host
// stops vouching before that, it asks the leader at once and times it out
// a leader timeout (and its jitter) later, as without Vouched. The skipped
// ticks (Advance) agree with the real ones.
func TestVouchedFollowerWaitsForItsFirstAnswer(t *testing.T) {
	for _, skipping := range []bool{false, true} {
		v := map[election.NodeID]bool{3: true}
		sm, _ := announcedFollower(t, &v)
		hbs := 0
		for range 100 { // ten leader timeouts, no answer
			if skipping {
				sm.(interface{ Advance(int) }).Advance(1)
			} else {
				sm.Tick()
			}
			for _, m := range sm.Ready().Messages {
				if m.Type == election.MsgHeartbeat {
					hbs++
				}
			}
		}
		if st := sm.Status(); st.Role != election.RoleFollower || st.Leader != 3 {
			t.Fatalf("skipping %v: unanswered by a vouched leader for ten leader timeouts: %+v, want it following 3", skipping, st)
		}
		if hbs < 45 || hbs > 50 {
			t.Fatalf("skipping %v: %d heartbeats in 100 ticks to a leader that never answered, want one an interval (50)", skipping, hbs)
		}
		v[3] = false
		if got := countSent(sm, 1, election.MsgHeartbeat); got != 1 {
			t.Fatalf("skipping %v: the tick after the host stopped vouching: %d heartbeats, want 1 (ask the leader at once)", skipping, got)
		}
		timedOut := false
		for i := range 30 {
			sm.Tick()
			sm.Ready()
			if sm.Status().Role != election.RoleFollower {
				if after := i + 2; after <= 10 {
					t.Fatalf("skipping %v: timed the leader out %d ticks after the host stopped vouching, want more than a leader timeout (10)", skipping, after)
				}
				timedOut = true
				break
			}
		}
		if !timedOut {
			t.Fatalf("skipping %v: an unvouched, silent leader was never timed out", skipping)
		}
	}
}

// A quiet follower answers its leader's announcement with a heartbeat at
// once when the leader announces again the support it announced before,
// short of every member: it is re-announcing itself to a member it has not
// heard lately, which may be this node (its host stopped vouching for this
// node a moment while this node's kept vouching for the leader, so this
// node kept quiet). A drop told once to every member, an announcement of
// every member's support, or one passed on by another member gets no
// answer; and it answers at most once a quiet interval.
func TestQuietFollowerAnswersAnAnnouncementThatLeavesAMemberOut(t *testing.T) {
	v := map[election.NodeID]bool{3: true}
	sm, lead := announcedFollower(t, &v)
	if err := sm.Step(election.Message{Type: election.MsgHeartbeatResp, From: 3, To: 1, Term: lead, Leader: 3, Support: 3}); err != nil {
		t.Fatal(err)
	}
	countSent(sm, 5, election.MsgHeartbeat)
	if !sm.Status().Quiet {
		t.Fatalf("answered and vouched for: %+v, want it quiet", sm.Status())
	}
	heartbeats := func(support uint32, from election.NodeID) (n int) {
		if err := sm.Step(election.Message{Type: election.MsgCoordinator, From: from, To: 1, Term: lead, Leader: 3, Confirmed: true, Support: support}); err != nil {
			t.Fatal(err)
		}
		for _, m := range sm.Ready().Messages {
			if m.Type == election.MsgHeartbeat && m.To == 3 && m.Term == lead {
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		support uint32
		from    election.NodeID
		want    int
		what    string
	}{
		{3, 3, 0, "every member's support"},
		{2, 3, 0, "a drop of the support, told once"},
		{2, 2, 0, "the same, passed on by another member"},
		{2, 3, 1, "the leader's announcement again, short of a member"},
		{2, 3, 0, "again in the same tick"},
	} {
		if n := heartbeats(c.support, c.from); n != c.want {
			t.Fatalf("%s: %d heartbeats, want %d", c.what, n, c.want)
		}
	}
	if !sm.Status().Quiet {
		t.Fatalf("after answering: %+v, want it still quiet", sm.Status())
	}
	countSent(sm, 39, election.MsgHeartbeat)
	if n := heartbeats(2, 3); n != 0 {
		t.Fatalf("again within a quiet interval (40 ticks): %d heartbeats, want none", n)
	}
	countSent(sm, 1, election.MsgHeartbeat)
	if n := heartbeats(2, 3); n != 1 {
		t.Fatalf("again a quiet interval later: %d heartbeats, want 1", n)
	}
}

// A vouched leader that answers with an older term of its own (its
// announcement of the newer one lost on the way) is handed that
// announcement by a follower still waiting for its first answer, after
// half a leader timeout, as by one that times it by its answers: the
// follower counts the time since it followed, though it does not time the
// leader out.
func TestVouchedFollowerHandsABehindLeaderItsAnnouncement(t *testing.T) {
	v := map[election.NodeID]bool{3: true}
	sm, lead := announcedFollower(t, &v)
	older := election.NextTerm(0, 1)
	if older >= lead {
		t.Fatalf("term %v is not older than %v", older, lead)
	}
	handed := 0
	for tick := range 20 {
		sm.Tick()
		for _, m := range sm.Ready().Messages {
			if m.Type == election.MsgHeartbeat {
				if err := sm.Step(election.Message{Type: election.MsgHeartbeatResp, From: 3, To: 1, Term: older, Leader: 3}); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, m := range sm.Ready().Messages {
			if m.Type == election.MsgCoordinator && m.To == 3 && m.Term == lead {
				if tick < 5 {
					t.Fatalf("handed the leader its announcement at tick %d, before half a leader timeout (5)", tick)
				}
				handed++
			}
		}
	}
	if handed == 0 {
		t.Fatal("a vouched leader answering with an older term was never handed its announcement")
	}
	if st := sm.Status(); st.Role != election.RoleFollower || st.Leader != 3 {
		t.Fatalf("after 20 ticks of behind answers from a vouched leader: %+v, want it following 3", st)
	}
}

// A leader whose members keep quiet, heard lately and told its support,
// is next due when a member's window ends, not at every leader-timeout
// round: the rounds between would send nothing.
func TestQuietLeaderSleepsThroughEmptyRounds(t *testing.T) {
	v := map[election.NodeID]bool{1: true, 2: true}
	sm := quietLeader(t, &v)
	sm.Ready()
	due := func() int { return sm.(interface{ TicksUntilDue() int }).TicksUntilDue() }
	if got := due(); got > 10 {
		t.Fatalf("a leader that has not told its support is due in %d ticks, want at the next round (10)", got)
	}
	if got := countSent(sm, 10, election.MsgCoordinator); got != 2 {
		t.Fatalf("the first round sent %d announcements, want the support to both members", got)
	}
	// Heard at tick 0, counted for 10 + 40 ticks: nothing to do until the
	// round after tick 50, at tick 60.
	if got := due(); got != 50 {
		t.Fatalf("at tick 10, with both members heard lately and the support told, due in %d ticks, want 50 (the round at 60)", got)
	}
	v[2] = false // the host's answer changed: member 2's window is a leader timeout
	if got := due(); got != 10 {
		t.Fatalf("member 2 no longer vouched for: due in %d ticks, want 10 (the next round)", got)
	}
}

// A leader counts a member the host vouches for as heard for a quiet
// interval and a leader timeout after its last heartbeat: it does not
// re-announce itself to it meanwhile, and counts it in its support; after
// that, or as soon as the host stops vouching, it does both as without
// Vouched.
func TestLeaderCountsAVouchedMemberForAQuietInterval(t *testing.T) {
	v := map[election.NodeID]bool{1: true, 2: true}
	sm := quietLeader(t, &v)
	st := sm.Status()
	support := func() uint32 {
		t.Helper()
		for _, m := range sm.Ready().Messages {
			if m.Type == election.MsgHeartbeatResp {
				return m.Support
			}
		}
		t.Fatal("no heartbeat answer")
		return 0
	}
	support()
	// Within a quiet interval and a leader timeout (50 ticks): both members
	// still count, and the only announcements tell them the support (3) at
	// the first round, since their quiet followers hear it no other way.
	told := map[election.NodeID]uint32{}
	for range 45 {
		sm.Tick()
		for _, m := range sm.Ready().Messages {
			if m.Type == election.MsgCoordinator {
				if _, again := told[m.To]; again {
					t.Fatalf("a second announcement to %d, a vouched member heard within 45 ticks", m.To)
				}
				told[m.To] = m.Support
			}
		}
	}
	if told[1] != 3 || told[2] != 3 {
		t.Fatalf("support told in 45 ticks: %v, want 3 to members 1 and 2", told)
	}
	v[2] = false
	sm.Step(election.Message{Type: election.MsgHeartbeat, From: 1, To: 3, Term: st.LeaderTerm, Leader: 3})
	if got := support(); got != 2 {
		t.Fatalf("support with member 1 vouched, 2 not and silent for 45 ticks: %d, want 2", got)
	}
	// At the next round member 2, no longer vouched for and silent, is
	// re-announced to, and member 1 is told the support fell to 2; in the
	// round after, only member 2 is announced to again.
	for round, want := range []map[election.NodeID]uint32{{1: 2, 2: 2}, {2: 2}} {
		to := announced(sm, 10)
		if !maps.Equal(to, want) {
			t.Fatalf("round %d: announcements (member: support) %v, want %v", round+1, to, want)
		}
		sm.Step(election.Message{Type: election.MsgHeartbeat, From: 1, To: 3, Term: st.LeaderTerm, Leader: 3})
		sm.Ready()
	}
}

// A member the host stopped vouching for (a partition) and vouches for
// again (the heal) counts by its new heartbeats only: what it said before
// the cut is no word on whom it follows now, so the leader neither counts
// it in its support nor spares it its announcement.
func TestLeaderForgetsAQuietHeardMemberAcrossACut(t *testing.T) {
	v := map[election.NodeID]bool{1: true, 2: true}
	sm := quietLeader(t, &v)
	sm.Ready()
	countSent(sm, 5, election.MsgCoordinator)
	for _, id := range []election.NodeID{1, 2} {
		v[id] = false
		sm.Observe(election.Event{Type: election.EventUnvouched, Member: election.Member{ID: id}})
	}
	countSent(sm, 20, election.MsgCoordinator) // cut off for 20 ticks, two leader timeouts
	v[1], v[2] = true, true                    // healed, vouched for again
	to := announced(sm, 10)
	if len(to) != 2 || to[1] != 1 || to[2] != 1 {
		t.Fatalf("the round after the heal announced (member: support) %v, want both members told support 1 (the leader alone)", to)
	}
}

// A leader whose host stood still (EventStalled) tells every member who
// leads at its next round, though each member's heartbeat, read after the
// stall, counts it as heard: what waited in the host's inbox through the
// stall was sent before the member may have timed this leader out. At rest
// without the event, the same rounds announce nothing.
func TestStalledLeaderTellsEveryMemberAtItsNextRound(t *testing.T) {
	v := map[election.NodeID]bool{1: true, 2: true}
	sm := quietLeader(t, &v)
	sm.Ready()
	countSent(sm, 10, election.MsgCoordinator) // the support told
	if got := countSent(sm, 10, election.MsgCoordinator); got != 0 {
		t.Fatalf("at rest a round announced %d times, want none", got)
	}
	sm.Observe(election.Event{Type: election.EventStalled})
	term := sm.Status().LeaderTerm
	for _, id := range []election.NodeID{1, 2} { // the heartbeats that waited through the stall
		if err := sm.Step(election.Message{Type: election.MsgHeartbeat, From: id, To: 3, Term: term, Leader: 3}); err != nil {
			t.Fatal(err)
		}
	}
	sm.Ready()
	if due := sm.(interface{ TicksUntilDue() int }).TicksUntilDue(); due > 10 {
		t.Fatalf("after a stall the leader is due in %d ticks, want at its next round (10)", due)
	}
	if to := announced(sm, 10); len(to) != 2 {
		t.Fatalf("the round after a stall announced to %v, want both members", to)
	}
}

// A support to tell goes to the members the host vouches for, which may
// keep quiet; a member heard lately that the host does not vouch for
// heartbeats every interval, and each answer tells it the support, so a
// round announces nothing to it.
func TestSupportIsToldOnlyToVouchedMembers(t *testing.T) {
	v := map[election.NodeID]bool{1: true}
	sm := quietLeader(t, &v)
	st := sm.Status()
	sm.Ready()
	told := map[election.NodeID]uint32{}
	for tick := range 10 {
		if tick%2 == 0 { // member 2 heartbeats every interval (HeartbeatTicks 2)
			if err := sm.Step(election.Message{Type: election.MsgHeartbeat, From: 2, To: 3, Term: st.LeaderTerm, Leader: 3}); err != nil {
				t.Fatal(err)
			}
		}
		sm.Tick()
		for _, m := range sm.Ready().Messages {
			switch {
			case m.Type == election.MsgCoordinator:
				told[m.To] = m.Support
			case m.Type == election.MsgHeartbeatResp && m.To == 2 && m.Support != 3:
				t.Fatalf("answer to member 2 tells support %d, want 3", m.Support)
			}
		}
	}
	if want := map[election.NodeID]uint32{1: 3}; !maps.Equal(told, want) {
		t.Fatalf("first round's announcements (member: support) %v, want %v", told, want)
	}
}

// A leader that reasserts itself at a new term (a member refused it,
// naming a newer term whose leader nobody knows) re-announces itself at
// its next round to a quiet member that has not spoken at the new term:
// that member's copy of the broadcast may be lost, and its quiet
// heartbeat, the only other way it would hear of the new term, may be a
// quiet interval away. What the member said at the old term still counts
// toward the support: a leader that reasserts is no weaker against a rival
// for it.
func TestReassertedLeaderReannouncesToASilentQuietMember(t *testing.T) {
	v := map[election.NodeID]bool{1: true, 2: true}
	sm := quietLeader(t, &v)
	sm.Ready()
	countSent(sm, 10, election.MsgCoordinator) // the support told
	old := sm.Status().LeaderTerm
	newer := election.NextTerm(election.NextTerm(old, 2), 2)
	if err := sm.Step(election.Message{Type: election.MsgHeartbeatResp, From: 1, To: 3, Term: newer, Reject: true}); err != nil {
		t.Fatal(err)
	}
	st := sm.Status()
	if st.Role != election.RoleLeader || st.LeaderTerm <= newer {
		t.Fatalf("after a refusal naming a newer term: %+v, want node 3 leading above %v", st, newer)
	}
	broadcast := 0
	for _, m := range sm.Ready().Messages {
		if m.Type == election.MsgCoordinator && m.Term == st.LeaderTerm {
			broadcast++ // member 2's copy is lost
		}
	}
	if broadcast != 2 {
		t.Fatalf("the reassertion announced %d times, want to both members", broadcast)
	}
	// Member 1 heard it and heartbeats at the new term; member 2 keeps
	// quiet at the old one.
	if err := sm.Step(election.Message{Type: election.MsgHeartbeat, From: 1, To: 3, Term: st.LeaderTerm, Leader: 3}); err != nil {
		t.Fatal(err)
	}
	sm.Ready()
	to := announced(sm, 10)
	if !maps.Equal(to, map[election.NodeID]uint32{2: 3}) {
		t.Fatalf("the round after the reassertion announced (member: support) %v, want member 2 alone, told support 3", to)
	}
	// Until member 2 speaks at the new term, each round announces to it.
	if to := announced(sm, 10); !maps.Equal(to, map[election.NodeID]uint32{2: 3}) {
		t.Fatalf("the second round after the reassertion announced %v, want member 2 again", to)
	}
	if err := sm.Step(election.Message{Type: election.MsgHeartbeat, From: 2, To: 3, Term: st.LeaderTerm, Leader: 3}); err != nil {
		t.Fatal(err)
	}
	sm.Ready()
	if to := announced(sm, 10); len(to) != 0 {
		t.Fatalf("once member 2 spoke at the new term, a round announced %v, want nothing", to)
	}
}

// A ring round that chooses the sitting leader again, at a new term, is
// the same leadership moved to a new term, as a reassertion is: a quiet
// member whose copy of the round's announcement was lost is announced to
// at the leader's next round.
func TestRingReelectedLeaderReannouncesToASilentQuietMember(t *testing.T) {
	v := map[election.NodeID]bool{1: true, 2: true}
	sm, err := ring.New(quietCfg(3, &v))
	if err != nil {
		t.Fatal(err)
	}
	if err := sm.Step(election.Message{Type: election.MsgCoordinator, From: 2, To: 3, Term: election.NextTerm(0, 3), Leader: 3, Confirmed: true}); err != nil {
		t.Fatal(err)
	}
	st := sm.Status()
	if st.Role != election.RoleLeader {
		t.Fatalf("a ring announcement named node 3: %+v, want it leading", st)
	}
	for _, id := range []election.NodeID{1, 2} {
		if err := sm.Step(election.Message{Type: election.MsgHeartbeat, From: id, To: 3, Term: st.LeaderTerm, Leader: 3}); err != nil {
			t.Fatal(err)
		}
	}
	sm.Ready()
	countSent(sm, 10, election.MsgCoordinator) // the support told
	// Member 2 ran a round that chose node 3 again, at a newer term; the
	// round's announcement to member 1 is lost, member 2 heartbeats.
	newer := election.NextTerm(election.NextTerm(st.Term, 2), 3)
	if err := sm.Step(election.Message{Type: election.MsgCoordinator, From: 2, To: 3, Term: newer, Leader: 3, Confirmed: true, Support: 3}); err != nil {
		t.Fatal(err)
	}
	if st = sm.Status(); st.Role != election.RoleLeader || st.LeaderTerm != newer {
		t.Fatalf("after the round: %+v, want node 3 leading at %v", st, newer)
	}
	sm.Ready()
	if err := sm.Step(election.Message{Type: election.MsgHeartbeat, From: 2, To: 3, Term: newer, Leader: 3}); err != nil {
		t.Fatal(err)
	}
	sm.Ready()
	if to := announced(sm, 10); !maps.Equal(to, map[election.NodeID]uint32{1: 3}) {
		t.Fatalf("the round after the re-election announced (member: support) %v, want member 1 alone, told support 3", to)
	}
}

// Hears says what a leader's rounds act on: a member heard at its term
// within its window counts; one silent past it, or the leader's own ID,
// or any member once this node no longer leads, does not.
func TestHearsIsWhatTheRoundsCount(t *testing.T) {
	v := map[election.NodeID]bool{}
	sm := quietLeader(t, &v)
	h, ok := sm.(election.Hearer)
	if !ok {
		t.Fatal("the core does not implement election.Hearer")
	}
	if !h.Hears(1) || !h.Hears(2) || h.Hears(3) {
		t.Fatalf("after members 1 and 2 heartbeat: hears 1 %v, 2 %v, itself %v; want true, true, false", h.Hears(1), h.Hears(2), h.Hears(3))
	}
	st := sm.Status()
	for range 11 { // past the leader timeout (10 ticks), member 2 heartbeating
		sm.Tick()
		if err := sm.Step(election.Message{Type: election.MsgHeartbeat, From: 2, To: 3, Term: st.LeaderTerm, Leader: 3}); err != nil {
			t.Fatal(err)
		}
	}
	if h.Hears(1) || !h.Hears(2) {
		t.Fatalf("member 1 silent past a leader timeout, 2 heartbeating: hears 1 %v, 2 %v; want false, true", h.Hears(1), h.Hears(2))
	}
	if err := sm.Transfer(2); err != nil {
		t.Fatal(err)
	}
	if h.Hears(2) {
		t.Fatal("a node that handed its leadership over still hears member 2")
	}
}
