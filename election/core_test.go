package election_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/algorithms"
	"github.com/electord/electord/election/bully"
	"github.com/electord/electord/election/ring"
)

func TestTermEncoding(t *testing.T) {
	t1 := election.NextTerm(0, 7)
	if t1.Epoch() != 1 || !t1.OwnedBy(7) || t1.OwnedBy(8) {
		t.Fatalf("NextTerm(0,7)=%v: epoch %d, owned by 7 %v", t1, t1.Epoch(), t1.OwnedBy(7))
	}
	t2 := election.NextTerm(t1, 3)
	if t2 <= t1 || t2.Epoch() != 2 || !t2.OwnedBy(3) {
		t.Fatalf("NextTerm(%v,3)=%v", t1, t2)
	}
	// Two nodes that saw the same term never mint the same next term.
	if election.NextTerm(t2, 1) == election.NextTerm(t2, 2) {
		t.Fatal("two owners minted the same term")
	}
	if election.Term(0).OwnedBy(0) {
		t.Fatal("term 0 is owned by no one")
	}
	if got := election.NextTerm(t2, 3).String(); got != "3.3" {
		t.Fatalf("String() = %q", got)
	}
}

func TestRankOrder(t *testing.T) {
	low, high := election.Rank{Priority: 0, ID: 9}, election.Rank{Priority: 1, ID: 1}
	if !low.Less(high) || high.Less(low) || low.Compare(low) != 0 {
		t.Fatal("priority must dominate id")
	}
	if !(election.Rank{ID: 1}).Less(election.Rank{ID: 2}) {
		t.Fatal("id breaks ties")
	}
}

func TestConfigValidateNamesTheField(t *testing.T) {
	cases := []struct {
		cfg  election.Config
		want string
	}{
		{election.Config{}, "ID:"},
		{election.Config{ID: 1, HeartbeatTicks: 5, LeaderTimeoutTicks: 5}, "LeaderTimeoutTicks: must exceed HeartbeatTicks"},
		{election.Config{ID: 1, Peers: []election.Member{{ID: 1}}}, "Peers: contains this node's own id"},
		{election.Config{ID: 1, Quorum: -1}, "Quorum:"},
		{election.Config{ID: 1, Quorum: 3, LeaderTimeoutTicks: 5, LeaseTicks: 5}, "LeaseTicks: must be below LeaderTimeoutTicks"},
		{election.Config{ID: 1, AnswerTimeoutTicks: -1}, "AnswerTimeoutTicks: must not be negative"},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want an error containing %q", c.cfg, err, c.want)
		}
		if _, err := ring.New(c.cfg); err == nil {
			t.Errorf("ring.New accepted %+v", c.cfg)
		}
	}
	if err := (election.Config{ID: 1, Quorum: 3}).Validate(); err != nil {
		t.Fatalf("defaults must validate: %v", err)
	}
}

func newNode(t *testing.T, algo string, id election.NodeID, peers ...election.NodeID) election.StateMachine {
	t.Helper()
	cfg := election.Config{ID: id}
	for _, p := range peers {
		cfg.Peers = append(cfg.Peers, election.Member{ID: p})
	}
	c, err := algorithms.New(algo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStepRejectsBadMessagesAndCountsThem(t *testing.T) {
	for _, algo := range []string{"ring", "bully"} {
		c := newNode(t, algo, 2, 1, 3)
		term := election.NextTerm(0, 3)
		bad := []election.Message{
			{Type: 99, From: 1, To: 2, Term: term},
			{Type: election.MsgCoordinator, From: 2, To: 2, Term: term, Leader: 3},                          // from itself
			{Type: election.MsgCoordinator, From: 3, To: 9, Term: term, Leader: 3},                          // not for us
			{Type: election.MsgCoordinator, From: 3, To: 2, Term: 0, Leader: 3},                             // zero term
			{Type: election.MsgCoordinator, From: 1, To: 2, Term: term, Leader: 1},                          // 1 does not own the term
			{Type: election.MsgElection, From: 1, To: 2, Term: term, Initiator: 1},                          // initiator does not own it
			{Type: election.MsgHeartbeat, From: 3, To: 2, Term: term, FromRank: election.Rank{Priority: 9}}, // impossible rank
			{Type: election.MsgElection, From: 1, To: 2, Term: election.NextTerm(0, 1), Initiator: 1,
				Candidates: []election.Rank{{Priority: 100, ID: 3}}}, // candidate claims a rank it does not have
		}
		for i, m := range bad {
			if err := c.Step(m); !errors.Is(err, election.ErrInvalidMessage) {
				t.Errorf("%s: bad message %d (%+v) gave %v, want ErrInvalidMessage", algo, i, m, err)
			}
		}
		if got := c.Status().Rejected; got != uint64(len(bad)) {
			t.Errorf("%s: Rejected = %d, want %d", algo, got, len(bad))
		}
		if st := c.Status(); st.Role != election.RoleNoLeader || st.Term != 0 || c.HasReady() {
			t.Errorf("%s: a rejected message changed state: %+v", algo, st)
		}
	}
}

func TestStaleCoordinatorIsAnsweredWithTheNewerTerm(t *testing.T) {
	c := newNode(t, "bully", 2, 1, 3)
	newer := election.NextTerm(election.NextTerm(0, 1), 3)
	if err := c.Step(election.Message{Type: election.MsgCoordinator, From: 3, To: 2, Term: newer, Leader: 3, Confirmed: true}); err != nil {
		t.Fatal(err)
	}
	rd := c.Ready()
	if rd.Term != newer || rd.Change == nil || rd.Change.Leader != 3 || rd.Change.Role != election.RoleFollower {
		t.Fatalf("following 3: %+v", rd)
	}
	stale := election.NextTerm(0, 1)
	if err := c.Step(election.Message{Type: election.MsgCoordinator, From: 1, To: 2, Term: stale, Leader: 1, Confirmed: true}); err != nil {
		t.Fatal(err)
	}
	rd = c.Ready()
	if rd.Change != nil || rd.Term != 0 {
		t.Fatalf("a stale Coordinator changed the leadership: %+v", rd)
	}
	if len(rd.Messages) != 1 || rd.Messages[0].Type != election.MsgHeartbeatResp || !rd.Messages[0].Reject ||
		rd.Messages[0].Term != newer || rd.Messages[0].Leader != 3 || rd.Messages[0].To != 1 {
		t.Fatalf("stale Coordinator must be answered with the newer term: %+v", rd.Messages)
	}
}

func TestReadyCarriesTheTermBeforeMessages(t *testing.T) {
	// A lone node campaigns: the term it must persist comes in the same
	// Ready as nothing else to send, and it leads in a term it owns.
	c := newNode(t, "bully", 4)
	c.Campaign()
	rd := c.Ready()
	if rd.Term == 0 || !rd.Term.OwnedBy(4) || rd.Change == nil || rd.Change.Role != election.RoleLeader {
		t.Fatalf("lone node: %+v", rd)
	}
	if c.HasReady() {
		t.Fatal("Ready must clear what it returned")
	}
	// A restarted node starts from its persisted term and never mints a lower one.
	r, err := bully.New(election.Config{ID: 4, Term: rd.Term})
	if err != nil {
		t.Fatal(err)
	}
	r.Campaign()
	if rd2 := r.Ready(); rd2.Term <= rd.Term {
		t.Fatalf("after restart the new term %v is not above the persisted %v", rd2.Term, rd.Term)
	}
}

func TestResignAndTransferErrors(t *testing.T) {
	c := newNode(t, "ring", 1, 2)
	if err := c.Resign(); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Resign as follower: %v", err)
	}
	if err := c.Transfer(2); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Transfer as follower: %v", err)
	}
	lone := newNode(t, "ring", 1)
	lone.Campaign()
	if lone.Status().Role != election.RoleLeader {
		t.Fatalf("a lone ring node elects itself: %+v", lone.Status())
	}
	if err := lone.Resign(); !errors.Is(err, election.ErrNoCandidate) {
		t.Fatalf("Resign with no one else: %v", err)
	}
	if err := lone.Transfer(9); !errors.Is(err, election.ErrUnknownNode) {
		t.Fatalf("Transfer to an unknown node: %v", err)
	}
}

// A Candidacy in no election is valid only as an incarnation's
// announcement: standing, leading or a value there is refused.
func TestCheckMessageCandidacyInNoElection(t *testing.T) {
	hello := election.Message{Type: election.MsgCandidacy, From: 1, To: 2, Incarnation: 7}
	if err := election.CheckMessage(hello, 2); err != nil {
		t.Fatalf("an incarnation's announcement: %v", err)
	}
	for _, m := range []election.Message{
		{Type: election.MsgCandidacy, From: 1, To: 2},
		{Type: election.MsgCandidacy, From: 1, To: 2, Incarnation: 7, Confirmed: true},
		{Type: election.MsgCandidacy, From: 1, To: 2, Incarnation: 7, Term: election.NextTerm(0, 1)},
		{Type: election.MsgCandidacy, From: 1, To: 2, Incarnation: 7, Value: "app"},
	} {
		if err := election.CheckMessage(m, 2); !errors.Is(err, election.ErrInvalidMessage) {
			t.Errorf("%+v: %v, want invalid", m, err)
		}
	}
}
