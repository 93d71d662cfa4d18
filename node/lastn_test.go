package node

import (
	"testing"

	"github.com/electord/electord/election"
)

// TestLastNKeepsTheLastAndUpdatesTheNewest: before and after it wraps, the
// lastN lists the last values oldest first, and updateLast changes the
// newest one.
func TestLastNKeepsTheLastAndUpdatesTheNewest(t *testing.T) {
	var r lastN[ElectionRecord]
	r.updateLast(func(*ElectionRecord) { t.Fatal("updateLast called f on an empty lastN") })
	for i := 1; i <= ElectionsKept+5; i++ {
		r.add(ElectionRecord{Term: election.Term(i)})
		r.updateLast(func(e *ElectionRecord) { e.Messages = uint64(i) })
		got := r.list()
		if want := min(i, ElectionsKept); len(got) != want {
			t.Fatalf("after %d adds: %d kept, want %d", i, len(got), want)
		}
		for j, e := range got {
			if term := election.Term(i - len(got) + 1 + j); e.Term != term || e.Messages != uint64(term) {
				t.Fatalf("after %d adds: [%d] = term %v, messages %d; want %v, %d", i, j, e.Term, e.Messages, term, uint64(term))
			}
		}
	}
}
