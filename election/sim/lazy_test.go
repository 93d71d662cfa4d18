package sim

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/electord/electord/election"
)

// A run whose nodes are ticked only when due, the idle ticks applied at
// once with Advance (Options.Lazy), is the run ticked every tick: the same
// leadership changes at the same ticks and the same messages, over random
// fault schedules of both algorithms, quorum mode and plain.
// The schedules run at the simulator's default timings (a heartbeat every
// tick) and at the product's proportions (a heartbeat every 20 ticks, so
// that followers sit idle between them), with and without a host that
// vouches for members (Options.Vouch: quiet followers sit idle longer, and
// a lazy machine is synced before the host stops vouching).
func TestLazyTicksAreTicks(t *testing.T) {
	n := min(*propCount, 300)
	product := func(cfg *election.Config) {
		cfg.HeartbeatTicks, cfg.LeaderTimeoutTicks, cfg.JitterTicks = 20, 60, 15
		cfg.AnswerTimeoutTicks, cfg.ElectionTimeoutTicks, cfg.HopTicks = 5, 40, 2
	}
	for _, algo := range []string{"bully", "ring"} {
		for _, timing := range []struct {
			name string
			tune func(*election.Config)
		}{{"default", nil}, {"product", product}} {
			for _, vouch := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/vouch=%v", algo, timing.name, vouch), func(t *testing.T) {
					for i := range n {
						seed := *propSeed + uint64(i)
						var every, lazy *Sim
						_, err1 := runScheduleOn(algo, seed, nil, false, vouch, timing.tune, &every)
						_, err2 := runScheduleOn(algo, seed, nil, true, vouch, timing.tune, &lazy)
						if fmt.Sprint(err1) != fmt.Sprint(err2) {
							t.Fatalf("seed %d: every tick: %v; lazy: %v", seed, err1, err2)
						}
						if !reflect.DeepEqual(every.Changes, lazy.Changes) {
							t.Fatalf("seed %d: leadership changes differ: %d every tick, %d lazy; first differing: %s",
								seed, len(every.Changes), len(lazy.Changes), firstDiff(every.Changes, lazy.Changes))
						}
						if !reflect.DeepEqual(every.Counts, lazy.Counts) {
							t.Fatalf("seed %d: messages differ: every tick %v, lazy %v", seed, every.Counts, lazy.Counts)
						}
					}
				})
			}
		}
	}
}

func firstDiff(a, b []Change) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("#%d %+v vs %+v", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("#%d (one run ended)", min(len(a), len(b)))
}
