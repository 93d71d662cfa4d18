package node

import (
	"testing"

	"github.com/electord/electord/election"
)

// BenchmarkSaveLeaderTerm is one leadership change's write: the leader term
// moves and the term stays within the reserve (the common case of a
// handover), on the disk under the test's temporary directory.
func BenchmarkSaveLeaderTerm(b *testing.B) {
	s, err := OpenTermStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	t := election.NextTerm(0, 1)
	if err := s.Save(t, t); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lt := election.Term(uint64(t) + uint64(i+1)) // a new slot of the same epoch: no new reserve
		if err := s.Save(0, lt); err != nil {
			b.Fatal(err)
		}
	}
}
