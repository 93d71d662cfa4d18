package chaos_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/electord/electord/tools/chaos"
)

// namedKinds are the faults of the short named-elections tour: the ones
// that move or end a leadership (of the default election, and with it the
// apps of a killed node) and every app fault, so that one tour fits CI.
var namedKinds = []string{chaos.Partition, chaos.IsolateLeader, chaos.Kill, chaos.KillLeader, chaos.PauseLeader,
	chaos.TermLeader, chaos.AppKill, chaos.AppKillLeader, chaos.AppPause}

// TestChaosNamed runs one short tour per algorithm with three named
// elections beside the default one, an app process per node in each (this
// binary again, as a candidate app), and app kills and pauses among the
// faults; it fails on any violation in any election. Plain mode (two claims
// at once are allowed there: Report.Overlaps). About a minute per algorithm.
func TestChaosNamed(t *testing.T) {
	needFaultnet(t, "named-elections chaos schedule")
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			o := chaos.Options{Algorithm: algo, Named: 3, Kinds: namedKinds, AppCommand: namedApp(t),
				Binary: electordBin, Nodes: 5, Seed: seed(t), Dir: t.TempDir(), Logf: t.Logf}
			ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
			defer cancel()
			res, err := chaos.Run(ctx, o)
			if err != nil {
				t.Fatalf("harness: %v", err)
			}
			report(t, res)
			for _, el := range res.Named {
				r := el.Report
				t.Logf("election %s: %d answers (%d failed requests), %d claims; %d heals, %d without agreement; %d two-claim episodes (allowed in plain mode)",
					el.Name, r.Obs, r.Errs, r.Claims, r.Heals, r.Unhealed, len(r.Overlaps))
				for _, v := range r.Violations {
					t.Errorf("election %s: violation %s", el.Name, r.Format(v))
				}
			}
		})
	}
}

// namedApp returns the command that runs this test binary as a candidate
// app (see appEnv).
func namedApp(t *testing.T) []string {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"env", fmt.Sprintf("%s=1", appEnv), self}
}
