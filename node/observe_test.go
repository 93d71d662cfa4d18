package node

import (
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// Elections keeps the last ElectionsKept records, oldest first, each
// closed with its outcome.
func TestElectionsKeepsTheLastOldestFirst(t *testing.T) {
	n := &Node{}
	total := ElectionsKept + 8
	for i := 1; i <= total; i++ {
		n.cause = cause{kind: "command"}
		n.electionStarted()
		st := election.Status{Role: election.RoleFollower, Leader: election.NodeID(i), LeaderTerm: election.Term(i)}
		if i%2 == 0 {
			st.Role = election.RoleLeader
		}
		n.electionEnded(st, uint64(i))
	}
	got := n.Elections()
	if len(got) != ElectionsKept {
		t.Fatalf("%d records, want %d", len(got), ElectionsKept)
	}
	for j, r := range got {
		want := total - ElectionsKept + 1 + j
		if r.Leader != election.NodeID(want) || r.Term != election.Term(want) || r.Messages != uint64(want) ||
			r.Won != (want%2 == 0) || r.Ended.Before(r.Started) || r.Cause != "command" {
			t.Errorf("record %d: %+v, want the election that ended with leader %d", j, r, want)
		}
	}
	if c := n.ElectionCounts(); c.Started != uint64(total) || c.Won != uint64(total/2) || c.Lost != uint64(total/2) {
		t.Errorf("counts %+v", c)
	}
}

// The failover of a real (in-memory) cluster is on record: the new leader
// won an election that started after the old leader stopped.
func TestElectionsRecordAFailover(t *testing.T) {
	c := newCluster(t, "bully", 3)
	c.agree(5*time.Second, 3)
	stopped := time.Now()
	c.stop(3)
	li := c.agree(5*time.Second, 2)
	var won bool
	for _, r := range c.nodes[2].Elections() {
		won = won || (r.Won && r.Leader == 2 && r.Term == li.Term && r.Started.After(stopped) && !r.Ended.IsZero())
	}
	if !won {
		t.Errorf("node 2 leads at %v but has no such election on record: %+v", li.Term, c.nodes[2].Elections())
	}
}
