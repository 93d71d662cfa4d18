package sim

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"hash"
	"os"
	"testing"
)

var propDigests = flag.String("prop.digests", "", "write one line per schedule (algorithm, seed, SHA-256 of its full trace) to this file")

// TestPropertyTraceDigests records, per seed, a digest of every message,
// role change and fault of the property schedules. Two builds whose
// digests are identical made the same decisions at the same ticks, which is
// how a refactoring of the core shows it changed no behaviour:
//
//	go test ./election/sim -run TestPropertyTraceDigests -prop.count=20000 -prop.digests=/tmp/after.txt
//
// and the same in a checkout of the build before, then diff the two files.
func TestPropertyTraceDigests(t *testing.T) {
	if *propDigests == "" {
		t.Skip("set -prop.digests=FILE to record the digests")
	}
	f, err := os.Create(*propDigests)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, algo := range []string{"ring", "bully"} {
		for i := range *propCount {
			seed := *propSeed + uint64(i)
			var h hash.Hash = sha256.New()
			trace := func(format string, a ...any) { fmt.Fprintf(h, format+"\n", a...) }
			sc, err := runSchedule(algo, seed, trace)
			outcome := "ok"
			if err != nil {
				outcome = "error: " + err.Error()
			}
			fmt.Fprintf(f, "%s %d %x %v %d %s\n", algo, seed, h.Sum(nil), sc, sc.healedAfter, outcome)
		}
	}
}
