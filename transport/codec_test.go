package transport

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/electord/electord/election"
	pb "github.com/electord/electord/proto/electord/v1"
)

func TestCodecRoundTrip(t *testing.T) {
	msgs := append(sampleMessages(1, 2),
		// Zero ranks, no candidates, a HeartbeatResp without a term.
		election.Message{Type: election.MsgElection, From: 1, To: 2, Term: 5, Initiator: 1},
		election.Message{Type: election.MsgCoordinator, From: 3, To: 2, Term: 5, Leader: 1},
		election.Message{Type: election.MsgHeartbeatResp, From: 3, To: 2},
		// Quorum mode's lease stamps and release.
		election.Message{Type: election.MsgCoordinator, From: 1, To: 2, Term: 5, Leader: 1, Confirmed: true, Stamp: 77},
		election.Message{Type: election.MsgHeartbeat, From: 2, To: 1, Term: 5, Leader: 1, Stamp: 77},
		election.Message{Type: election.MsgHeartbeatResp, From: 1, To: 2, Term: 5, Leader: 1, Stamp: 78},
		election.Message{Type: election.MsgHeartbeatResp, From: 1, To: 2, Term: 5, Release: true},
		// Plain mode's support of a leadership.
		election.Message{Type: election.MsgCoordinator, From: 1, To: 2, Term: 5, Leader: 1, Confirmed: true, Support: 4},
		election.Message{Type: election.MsgHeartbeatResp, From: 3, To: 2, Term: 5, Leader: 1, Reject: true, Support: 4},
		election.Message{Type: election.MsgTimeoutNow, From: 1, To: 2, Term: 5, Support: 3},
		// A named election's candidacy, with the sender's incarnation, and a
		// withdrawal.
		election.Message{Type: election.MsgCandidacy, From: 1, To: 2, Term: election.NextTerm(0, 1), Election: "jobs", Confirmed: true,
			FromRank: election.Rank{Priority: 7, ID: 1}, Value: "app-1", Incarnation: 1<<62 + 3},
		election.Message{Type: election.MsgCandidacy, From: 1, To: 2, Election: "jobs", FromRank: election.Rank{ID: 1}, Incarnation: 9},
		// A candidacy in no election: only the sender's incarnation.
		election.Message{Type: election.MsgCandidacy, From: 1, To: 2, FromRank: election.Rank{ID: 1}, Incarnation: 9},
		// ... and with the digest of the recipient's candidacies it holds.
		election.Message{Type: election.MsgCandidacy, From: 1, To: 2, FromRank: election.Rank{ID: 1}, Incarnation: 9, Held: 1<<63 + 5},
	)
	for _, m := range msgs {
		x, err := Encode(m)
		if err != nil {
			t.Fatalf("Encode(%+v): %v", m, err)
		}
		b, err := proto.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		y := x.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(b, y); err != nil {
			t.Fatal(err)
		}
		got, err := Decode(y, m.To)
		if err != nil {
			t.Fatalf("Decode(%v): %v", y, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%v round trip:\n got %+v\nwant %+v", m.Type, got, m)
		}
	}
}

func TestEncodeWireTypes(t *testing.T) {
	want := map[election.MsgType]proto.Message{
		election.MsgElection:       &pb.Election{},
		election.MsgAnswer:         &pb.Answer{},
		election.MsgCoordinator:    &pb.Coordinator{},
		election.MsgCoordinatorAck: &pb.CoordinatorAck{},
		election.MsgHeartbeat:      &pb.Heartbeat{},
		election.MsgHeartbeatResp:  &pb.HeartbeatReply{},
		election.MsgTimeoutNow:     &pb.TimeoutNow{},
	}
	for _, m := range sampleMessages(1, 2) {
		x, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		if reflect.TypeOf(x) != reflect.TypeOf(want[m.Type]) {
			t.Errorf("%v encodes as %T, want %T", m.Type, x, want[m.Type])
		}
	}
	// The ring incumbent travels as Election.incumbent.
	x, _ := Encode(election.Message{Type: election.MsgElection, From: 1, To: 2, Term: 1, Leader: 9})
	if got := x.(*pb.Election).GetIncumbent(); got != 9 {
		t.Errorf("incumbent = %d, want 9", got)
	}
	if _, err := Encode(election.Message{Type: 0, From: 1, To: 2}); err == nil {
		t.Error("Encode of type 0 succeeded")
	}
	if _, err := Encode(election.Message{Type: 99, From: 1, To: 2}); err == nil {
		t.Error("Encode of type 99 succeeded")
	}
}

func TestValidate(t *testing.T) {
	ok := election.Message{Type: election.MsgAnswer, From: 1, To: 2, Term: 3}
	with := func(f func(*election.Message)) election.Message {
		m := ok
		f(&m)
		return m
	}
	many := make([]election.Rank, MaxCandidates+1)
	for i := range many {
		many[i] = election.Rank{ID: election.NodeID(i + 1)}
	}
	cases := []struct {
		name  string
		m     election.Message
		field string // "" when valid
	}{
		{"ok", ok, ""},
		{"unknown type", with(func(m *election.Message) { m.Type = 42 }), "type"},
		{"zero type", with(func(m *election.Message) { m.Type = 0 }), "type"},
		{"from zero", with(func(m *election.Message) { m.From = 0 }), "Answer.from"},
		{"to zero", with(func(m *election.Message) { m.To = 0 }), "Answer.to"},
		{"to another node", with(func(m *election.Message) { m.To = 7 }), "Answer.to"},
		{"term zero", with(func(m *election.Message) { m.Term = 0 }), "Answer.term"},
		{"heartbeat reply without term", election.Message{Type: election.MsgHeartbeatResp, From: 1, To: 2}, ""},
		{"heartbeat without term", election.Message{Type: election.MsgHeartbeat, From: 1, To: 2}, "Heartbeat.term"},
		{"coordinator without leader", election.Message{Type: election.MsgCoordinator, From: 1, To: 2, Term: 3}, "Coordinator.leader"},
		{"candidate zero id", election.Message{Type: election.MsgElection, From: 1, To: 2, Term: 3,
			Candidates: []election.Rank{{ID: 1}, {Priority: 5}}}, "Election.candidates[1].id"},
		{"too many candidates", election.Message{Type: election.MsgElection, From: 1, To: 2, Term: 3, Candidates: many}, "Election.candidates"},
		{"max candidates", election.Message{Type: election.MsgElection, From: 1, To: 2, Term: 3, Candidates: many[:MaxCandidates]}, ""},
		{"digest in an election's candidacy", election.Message{Type: election.MsgCandidacy, From: 1, To: 2, Election: "jobs", Incarnation: 9, Held: 5}, "Candidacy.held"},
		{"digest in an incarnation", election.Message{Type: election.MsgCandidacy, From: 1, To: 2, Incarnation: 9, Held: 5}, ""},
		{"digest in a heartbeat", election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: 3, Held: 5}, "Heartbeat.held"},
	}
	for _, c := range cases {
		err := election.CheckMessage(c.m, 2)
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.field != "" && err == nil:
			t.Errorf("%s: accepted", c.name)
		case c.field != "" && (!errors.Is(err, ErrInvalidMessage) || !strings.Contains(err.Error(), c.field+":")):
			t.Errorf("%s: error %q does not wrap ErrInvalidMessage or name %q", c.name, err, c.field)
		}
	}
	// self 0 skips the recipient check.
	if err := election.CheckMessage(with(func(m *election.Message) { m.To = 7 }), 0); err != nil {
		t.Errorf("self 0: %v", err)
	}
}

func TestDecodeRefusesLongCandidateListEarly(t *testing.T) {
	x := &pb.Election{From: 1, To: 2, Term: 3, Candidates: make([]*pb.Rank, MaxCandidates+1)}
	_, err := Decode(x, 2)
	if !errors.Is(err, ErrInvalidMessage) || !strings.Contains(err.Error(), "Election.candidates") {
		t.Fatalf("err = %v", err)
	}
	// A nil entry decodes as a zero rank and is refused.
	x = &pb.Election{From: 1, To: 2, Term: 3, Candidates: []*pb.Rank{{Id: 1}, nil}}
	if _, err := Decode(x, 2); err == nil || !strings.Contains(err.Error(), "candidates[1].id") {
		t.Fatalf("nil candidate: err = %v", err)
	}
	if _, err := Decode((*pb.Answer)(nil), 2); !errors.Is(err, ErrInvalidMessage) {
		t.Fatalf("nil message: err = %v", err)
	}
	if _, err := Decode(&pb.Ack{}, 2); !errors.Is(err, ErrInvalidMessage) {
		t.Fatalf("Ack: err = %v", err)
	}
}
