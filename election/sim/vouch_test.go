package sim

import (
	"fmt"
	"testing"

	"github.com/electord/electord/election"
)

// The random fault schedules hold with a host that vouches for members
// (Options.Vouch): quiet followers, leaders that count a vouched member
// for a quiet interval, and the host's pair heartbeats deciding when a
// leader is gone. Quorum-mode schedules run as before (the core ignores
// Vouched there). The bounds the schedules check are the simulator's
// timings' (TestLazyTicksAreTicks runs the product's, with Vouch too).
func TestPropertyVouchedSchedules(t *testing.T) {
	for _, algo := range []string{"ring", "bully"} {
		for _, timing := range []struct {
			name string
			tune func(*election.Config)
		}{{"default", nil}} {
			t.Run(fmt.Sprintf("%s/%s", algo, timing.name), func(t *testing.T) {
				blips := 0
				for i := range *propCount {
					seed := *propSeed + uint64(i)
					sc, err := runScheduleOn(algo, seed, nil, false, true, timing.tune, nil)
					if err != nil {
						t.Fatalf("%s seed %d (%v): %v\nreproduce: go test ./election/sim -run 'TestPropertyVouchedSchedules/%s/%s' -prop.seed=%d -prop.count=1",
							algo, seed, sc, err, algo, timing.name, seed)
					}
					if !sc.quorum && sc.followerFault != "" {
						blips++
					}
				}
				t.Logf("%s/%s: %d schedules, plain-mode follower faults %d", algo, timing.name, *propCount, blips)
			})
		}
	}
}

// At rest, followers whose host vouches for their leader heartbeat once a
// quiet interval instead of once a heartbeat interval, and the leader,
// counting them, re-announces nothing.
func TestVouchedFollowersKeepQuiet(t *testing.T) {
	for _, algo := range []string{"ring", "bully"} {
		for _, vouch := range []bool{false, true} {
			s, err := New(Options{N: 5, Algorithm: algo, Seed: 1, Vouch: vouch})
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := s.RunUntil(200, func() bool { _, _, ok := s.Agreed(); return ok }); err != nil || !ok {
				t.Fatalf("%s vouch=%v: no agreement in 200 ticks (err %v): %s", algo, vouch, err, s.Describe())
			}
			if err := s.Run(100); err != nil { // every follower goes quiet
				t.Fatal(err)
			}
			leader, term, _ := s.Agreed()
			hb, co := s.Counts[election.MsgHeartbeat], s.Counts[election.MsgCoordinator]
			const ticks = 1000
			if err := s.Run(ticks); err != nil {
				t.Fatal(err)
			}
			if l, tm, ok := s.Agreed(); !ok || l != leader || tm != term {
				t.Fatalf("%s vouch=%v: the leader moved at rest: %s", algo, vouch, s.Describe())
			}
			hb, co = s.Counts[election.MsgHeartbeat]-hb, s.Counts[election.MsgCoordinator]-co
			quiet := s.Config(1).Defaults().QuietHeartbeatTicks
			limit := 4 * (ticks/quiet + 1)
			if !vouch {
				limit = 4 * ticks
			}
			t.Logf("%s vouch=%v: %d heartbeats and %d announcements in %d ticks at rest", algo, vouch, hb, co, ticks)
			if hb > limit || (vouch && co != 0) {
				t.Errorf("%s vouch=%v: %d heartbeats (at most %d) and %d announcements (want 0) in %d ticks at rest", algo, vouch, hb, limit, co, ticks)
			}
		}
	}
}
