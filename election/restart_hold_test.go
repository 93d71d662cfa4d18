package election_test

import (
	"testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/algorithms"
)

// TestRestartHoldsOffInQuorumMode: a quorum-mode node that starts with a
// persisted term (a restart or a revive) may have promised a leader its
// support just before it stopped, and that leader may still count it. For
// PromiseTicks after it starts it refuses every proposal (naming no
// leader) and proposes nothing itself; then it acknowledges as before. A
// first start (no term) has promised nothing and acknowledges at once,
// unless its store is volatile (nothing it persisted survives its process,
// so no term proves a first start).
// Plain mode has no promises and no hold.
func TestRestartHoldsOffInQuorumMode(t *testing.T) {
	for _, algo := range algorithms.Names() {
		t.Run(algo, func(t *testing.T) {
			known := election.NextTerm(0, 3) // the leadership node 3 knew before it stopped
			hold := restartHold(t, algo, election.Config{ID: 3, Quorum: 3, Term: known, LeaderTerm: known})
			want := election.Config{ID: 3, Quorum: 3}.Defaults().PromiseTicks()
			if hold != want {
				t.Errorf("restart: the first acknowledgement came at tick %d, want PromiseTicks = %d", hold, want)
			}
			if hold := restartHold(t, algo, election.Config{ID: 3, Quorum: 3}); hold != 0 {
				t.Errorf("first start: the first acknowledgement came at tick %d, want 0", hold)
			}
			// Nothing persisted: term 0 proves no first start.
			if hold := restartHold(t, algo, election.Config{ID: 3, Quorum: 3, Volatile: true}); hold != want {
				t.Errorf("start with a volatile store: the first acknowledgement came at tick %d, want PromiseTicks = %d", hold, want)
			}
		})
	}
	// The bully's highest node proposes as soon as its wait for a leader
	// (10 or 11 ticks here) ends: a restarted one only after PromiseTicks.
	known := election.NextTerm(0, 3)
	cfg := election.Config{ID: 3, Quorum: 3, Term: known, LeaderTerm: known, JitterTicks: 1,
		Peers: []election.Member{{ID: 1}, {ID: 2}}}
	sm, err := algorithms.New("bully", cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := cfg.Defaults().PromiseTicks()
	for tick := 1; tick <= 3*want; tick++ {
		sm.Tick()
		for _, m := range sm.Ready().Messages {
			if m.Type == election.MsgCoordinator && !m.Confirmed {
				if tick < want {
					t.Fatalf("bully: the restarted node proposed at tick %d, within PromiseTicks (%d) of its start", tick, want)
				}
				return
			}
		}
	}
	t.Fatalf("bully: the restarted highest node never proposed within %d ticks", 3*want)
}

// restartHold starts node cfg.ID of a three-node cluster and offers it node
// 2's proposal, at a new term, at every tick until it acknowledges one. It
// returns that tick, and fails if the node proposed before its first
// acknowledgement could come.
func restartHold(t *testing.T, algo string, cfg election.Config) int {
	t.Helper()
	cfg.Peers = []election.Member{{ID: 1}, {ID: 2}}
	sm, err := algorithms.New(algo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	term := cfg.Term
	limit := 3 * cfg.Defaults().PromiseTicks()
	for tick := 0; tick <= limit; tick++ {
		if tick > 0 {
			sm.Tick()
		}
		term = election.NextTerm(max(term, sm.Status().Term), 2)
		if err := sm.Step(election.Message{Type: election.MsgCoordinator, From: 2, To: cfg.ID, Term: term, Leader: 2}); err != nil {
			t.Fatalf("tick %d: proposal refused as malformed: %v", tick, err)
		}
		acked, refused := false, false
		for _, m := range sm.Ready().Messages {
			switch {
			case m.Type == election.MsgCoordinatorAck && m.To == 2 && m.Term == term:
				acked = true
			case m.Type == election.MsgHeartbeatResp && m.To == 2 && m.Reject:
				refused = true
			case m.Type == election.MsgCoordinator && m.Leader == cfg.ID && !m.Confirmed:
				t.Fatalf("tick %d: node %d proposed itself (term %v) while it holds off", tick, cfg.ID, m.Term)
			}
		}
		if acked {
			return tick
		}
		if !refused {
			t.Fatalf("tick %d: node 2's proposal at %v was neither acknowledged nor refused", tick, term)
		}
	}
	t.Fatalf("no acknowledgement within %d ticks", limit)
	return -1
}
