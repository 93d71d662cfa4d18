package election_test

import (
	"encoding/binary"
	"testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/algorithms"
)

// FuzzStateMachine drives one node's state machine, each algorithm, with
// and without quorum, through an arbitrary sequence of peer messages (any
// type, any field, terms up to 2^64-1), ticks, membership events and
// commands, and checks after every step that it did not panic and that:
//
//   - S2: the term it holds and the term it persists never decrease;
//   - S3: the leadership term it reports and persists never decreases;
//   - S1, as one node sees it: it leads only terms it owns, and names one
//     leader per term;
//   - every message it sends passes CheckMessage, so no term beyond
//     MaxEpoch ever leaves it (a forged huge term is refused, not adopted).
//
// Run: go test ./election -run '^$' -fuzz FuzzStateMachine -fuzztime 10m
func FuzzStateMachine(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{1, 5, 0x20, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 1, 1, 1})
	f.Add([]byte{2, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee})
	f.Add([]byte{3, 9, 0x30, 5, 0, 0, 0, 0, 0, 1, 0, 5, 0x30, 5, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &reader{b: data}
		runFuzz(t, r)
	})
}

type reader struct {
	b []byte
	i int
}

func (r *reader) more() bool { return r.i < len(r.b) }

func (r *reader) byte() byte {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *reader) u64() uint64 {
	var buf [8]byte
	for k := range buf {
		buf[k] = r.byte()
	}
	return binary.BigEndian.Uint64(buf[:])
}

// term draws a term: mostly small and owned by a cluster member, sometimes
// at the edges (MaxEpoch, 2^48-1, anything).
func (r *reader) term() election.Term {
	switch k := r.byte(); k % 8 {
	case 0:
		return 0
	case 1:
		return election.Term(r.u64())
	case 2:
		return election.Term(uint64(election.MaxEpoch)<<election.SlotBits | uint64(r.byte()%6))
	case 3:
		return election.Term((uint64(election.MaxEpoch)+1)<<election.SlotBits | uint64(r.byte()%6))
	case 4:
		return election.Term((1<<48-1)<<election.SlotBits | uint64(r.byte()%6))
	default:
		return election.Term(uint64(r.byte()%40)<<election.SlotBits | uint64(r.byte()%6))
	}
}

func (r *reader) id() election.NodeID { return election.NodeID(r.byte() % 7) } // 0 and 6 are not members

func runFuzz(t *testing.T, r *reader) {
	head := r.byte()
	algo := algorithms.Names()[int(head)%len(algorithms.Names())]
	quorum := 0
	if head&2 != 0 {
		quorum = 5
	}
	const self = election.NodeID(3)
	cfg := election.Config{ID: self, Quorum: quorum, Preempt: head&4 != 0, BootstrapExpect: int(head>>3) % 6,
		Peers: []election.Member{{ID: 1}, {ID: 2}, {ID: 4}, {ID: 5}}}
	if head&0x80 != 0 {
		cfg.Term = r.term()
		cfg.LeaderTerm = min(cfg.Term, r.term())
	}
	sm, err := algorithms.New(algo, cfg)
	if err != nil {
		if cfg.Validate() == nil {
			t.Fatalf("New refused a valid config %+v: %v", cfg, err)
		}
		return
	}
	inv := invariants{t: t, self: self, leaderOf: map[election.Term]election.NodeID{}}
	inv.check(sm, "start")
	for step := 0; r.more() && step < 2000; step++ {
		switch op := r.byte(); op % 10 {
		case 0, 1:
			sm.Tick()
		case 2:
			for range int(r.byte() % 32) {
				sm.Tick()
			}
		case 3:
			sm.Observe(election.Event{Type: election.EventJoin, Member: election.Member{ID: r.id(), Priority: int64(r.byte()%3) - 1}})
		case 4:
			typ := election.EventType(1 + r.byte()%6)
			from := election.NodeID(0)
			if r.byte()%4 != 0 {
				from = self // a send of this node's own that failed or was delivered, as the transport reports
			}
			sm.Observe(election.Event{Type: typ, Member: election.Member{ID: r.id()},
				Msg: election.Message{Type: election.MsgType(r.byte() % 10), From: from, To: r.id(), Term: r.term(), Leader: r.id(), Initiator: r.id()}})
		case 5:
			switch r.byte() % 3 {
			case 0:
				sm.Campaign()
			case 1:
				_ = sm.Resign()
			case 2:
				_ = sm.Transfer(r.id())
			}
		default:
			m := election.Message{
				Type: election.MsgType(r.byte() % 10), From: r.id(), To: self, Term: r.term(),
				Leader: r.id(), Initiator: r.id(), MaxTerm: r.term(),
				Reject: r.byte()&1 != 0, Confirmed: r.byte()&1 != 0, Elect: r.byte()&1 != 0,
				Stamp: uint64(r.byte()), Release: r.byte()%8 == 0,
			}
			if m.Type == election.MsgElection {
				m.InitiatorRank = election.Rank{ID: m.Initiator}
				for range int(r.byte() % 4) {
					m.Candidates = append(m.Candidates, election.Rank{ID: r.id()})
				}
			}
			if r.byte()%4 == 0 {
				m.FromRank = election.Rank{ID: m.From}
			}
			_ = sm.Step(m)
		}
		inv.check(sm, "step")
	}
}

type invariants struct {
	t                 *testing.T
	self              election.NodeID
	term, leaderTerm  election.Term
	saved, savedLeadr election.Term
	leaderOf          map[election.Term]election.NodeID
}

func (v *invariants) check(sm election.StateMachine, when string) {
	t := v.t
	for sm.HasReady() {
		rd := sm.Ready()
		if rd.Term != 0 {
			if rd.Term < v.saved {
				t.Fatalf("%s: persists term %v after %v (S2)", when, rd.Term, v.saved)
			}
			v.saved = rd.Term
		}
		if rd.LeaderTerm != 0 {
			if rd.LeaderTerm < v.savedLeadr {
				t.Fatalf("%s: persists leadership term %v after %v (S3)", when, rd.LeaderTerm, v.savedLeadr)
			}
			v.savedLeadr = rd.LeaderTerm
		}
		for _, m := range rd.Messages {
			if err := election.CheckMessage(m, 0); err != nil {
				t.Fatalf("%s: sends an invalid message %+v: %v", when, m, err)
			}
		}
	}
	st := sm.Status()
	if st.Term < v.term {
		t.Fatalf("%s: term went from %v back to %v (S2)", when, v.term, st.Term)
	}
	if st.LeaderTerm < v.leaderTerm {
		t.Fatalf("%s: leadership term went from %v back to %v (S3)", when, v.leaderTerm, st.LeaderTerm)
	}
	if st.Term.Epoch() > election.MaxConfigEpoch+1 {
		t.Fatalf("%s: term %v beyond MaxConfigEpoch+1", when, st.Term)
	}
	v.term, v.leaderTerm = st.Term, st.LeaderTerm
	if st.Role == election.RoleLeader && !st.LeaderTerm.OwnedBy(v.self) {
		t.Fatalf("%s: leads term %v, which it does not own (S1)", when, st.LeaderTerm)
	}
	if st.Leader != 0 {
		if prev, ok := v.leaderOf[st.LeaderTerm]; ok && prev != st.Leader {
			t.Fatalf("%s: term %v led by %d, earlier by %d (S1)", when, st.LeaderTerm, st.Leader, prev)
		}
		v.leaderOf[st.LeaderTerm] = st.Leader
	}
}
