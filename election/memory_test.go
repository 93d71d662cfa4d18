package election_test

import (
	"runtime"
	"testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/bully"
)

// A node runs a state machine per named election it stands in, thousands
// of them with the same four peers. A machine that knows its four members
// costs at most 900 bytes of heap (bully): the core struct in the 512-byte
// class, its members in one small sorted slice. Three maps per machine
// (members, last heard, not standing), and flags padded to a word each,
// made it about 1.1 KB.
func TestMachineHeapWithFourMembers(t *testing.T) {
	const k, limit = 2000, 900
	build := func() []election.StateMachine {
		sms := make([]election.StateMachine, 0, k)
		for i := range k {
			sm, err := bully.New(election.Config{ID: 1, Priority: int64(i % 3)})
			if err != nil {
				t.Fatal(err)
			}
			for id := election.NodeID(2); id <= 5; id++ {
				sm.Observe(election.Event{Type: election.EventJoin, Member: election.Member{ID: id}})
			}
			sm.Ready()
			sms = append(sms, sm)
		}
		return sms
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	sms := build()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	per := (int64(m1.HeapAlloc) - int64(m0.HeapAlloc) - int64(cap(sms))*16) / k
	t.Logf("%d B of heap per machine with four members", per)
	if per > limit {
		t.Errorf("a machine with four members costs %d B of heap, want at most %d", per, limit)
	}
	runtime.KeepAlive(sms)
}
