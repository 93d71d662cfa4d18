package engine

import (
	"bytes"
	"context"
	"runtime"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// TestIdleSessionBytes measures the heap an idle Session keeps after one
// call and Release, and holds it under a budget (the pool's target is 5 KB
// per idle connection, socket and handle included).
func TestIdleSessionBytes(t *testing.T) {
	const n = 1000
	reg := fuzzRegistry()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	req := append(clientStart(), request(enc, &hb, 1, "/enginetest.T/Echo", []byte{0, 0, 0, 0, 2, 10, 0})...)
	sessions := make([]*Session, n)
	// Two collections empty sync.Pools (primary, then victim), so neither
	// what earlier tests pooled nor what these sessions give back to the
	// pools is counted.
	gc := func() { runtime.GC(); runtime.GC() }
	gc()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range sessions {
		s := NewSession(reg, configured(Limits{}), nil)
		if err := s.Feed(req); err != nil {
			t.Fatal(err)
		}
		s.Serve(context.Background())
		s.Wrote(len(s.Output()))
		s.Release()
		sessions[i] = s
	}
	gc()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("idle session after one call: %d bytes of heap", per)
	if per <= 0 || per > 2000 {
		t.Errorf("idle session keeps %d bytes, want 1..2000", per)
	}
	runtime.KeepAlive(sessions)
}
