package named

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/electord/electord/election"
)

// A node's table holds the candidacies of every election it knows, thousands
// with the same four other candidates. An election with four candidacies
// costs at most 300 bytes of heap, its name and values aside: a small
// sorted slice per election. A map per election cost about 500.
func TestTableHeapWithFourCandidates(t *testing.T) {
	const k, limit = 2000, 300
	names := make([]string, k)
	for i := range names {
		names[i] = fmt.Sprintf("shard-%05d", i)
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	var tb Table
	for _, name := range names {
		for id := election.NodeID(2); id <= 5; id++ {
			tb.Set(name, id, Stand{Priority: 1, Value: "app"})
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	per := (int64(m1.HeapAlloc) - int64(m0.HeapAlloc)) / k
	t.Logf("%d B of heap per election with four candidates", per)
	if per > limit {
		t.Errorf("an election with four candidates costs %d B of the table's heap, want at most %d", per, limit)
	}
	runtime.KeepAlive(&tb)
}
