package election_test

import (
	"testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/bully"
)

// firstElection ticks sm until it sends an Election, at most k ticks, and
// returns the tick it did (0: none).
func firstElection(sm election.StateMachine, k int) int {
	for i := 1; i <= k; i++ {
		sm.Tick()
		for _, m := range sm.Ready().Messages {
			if m.Type == election.MsgElection {
				return i
			}
		}
	}
	return 0
}

// A leader timed out with a lead (a host failing many elections over at
// once) makes a node ranked below another wait that many ticks more before
// it campaigns, at most a leader timeout more; the highest survivor
// campaigns at once all the same.
func TestLeaderTimeoutLeadDelaysOnlyTheNodesBelow(t *testing.T) {
	follower := func(id election.NodeID) election.StateMachine {
		t.Helper()
		cfg := election.Config{ID: id, HeartbeatTicks: 2, LeaderTimeoutTicks: 10}
		for p := election.NodeID(1); p <= 3; p++ {
			if p != id {
				cfg.Peers = append(cfg.Peers, election.Member{ID: p})
			}
		}
		sm, err := bully.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := sm.Step(election.Message{Type: election.MsgCoordinator, From: 3, To: id, Term: election.NextTerm(0, 3), Leader: 3, Confirmed: true}); err != nil {
			t.Fatal(err)
		}
		sm.Ready()
		return sm
	}
	// Node 1, below node 2: its wait without a lead is a tick for node 2
	// and the highest survivor's head start of a tick per other member.
	base := follower(1)
	base.Observe(election.Event{Type: election.EventLeaderTimeout})
	without := firstElection(base, 50)
	if without == 0 {
		t.Fatal("node 1 never campaigned after its leader's timeout")
	}
	led := follower(1)
	led.Observe(election.Event{Type: election.EventLeaderTimeout, Lead: 5})
	if got := firstElection(led, 50); got != without+5 {
		t.Fatalf("with a lead of 5 node 1 campaigned at tick %d, want %d (%d without)", got, without+5, without)
	}
	capped := follower(1)
	capped.Observe(election.Event{Type: election.EventLeaderTimeout, Lead: 1000})
	if got := firstElection(capped, 50); got != without+10 {
		t.Fatalf("with a lead of 1000 node 1 campaigned at tick %d, want %d (a leader timeout more)", got, without+10)
	}
	// Node 2, the highest survivor: at once, lead or not.
	top := follower(2)
	top.Observe(election.Event{Type: election.EventLeaderTimeout, Lead: 5})
	if sent := top.Ready().Messages; len(sent) == 0 {
		t.Fatal("the highest survivor did not campaign at once with a lead")
	}
}
