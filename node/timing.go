package node

import (
	"time"

	"github.com/electord/electord/election"
)

func ticks(d, tick time.Duration) int { return max(1, int((d+tick-1)/tick)) }

// AnswerTimeout bounds a bully node's wait for an Answer from a higher
// node: many round trips on any network electord is meant for, and time
// for a peer that is briefly starved of CPU.
const AnswerTimeout = 30 * time.Millisecond

// electionConfig maps durations to the core's ticks.
func (c *Config) electionConfig(term election.Term) election.Config {
	hb := ticks(c.HeartbeatInterval, c.Tick)
	lt := ticks(c.HeartbeatTimeout, c.Tick)
	lease := max(hb+1, lt-hb)
	if c.Quorum > 0 {
		// A quorum leader counts a follower from the stamp the follower
		// echoes one heartbeat after it got it, so a follower's share of
		// the lease is renewed every interval but dated two intervals back:
		// the slack against a late heartbeat, reply or echo (or a stalled
		// leader) is lease - 2 x interval. The lease is three quarters of
		// the timeout (so at the defaults a follower's promise, lease x 5/4
		// + 2, ends before its own timeout fires; at timeouts of 30 ticks or
		// less it ends with it), and heartbeats go six times per timeout:
		// at the defaults (timeout 600 ms) a 100 ms interval, a 450 ms
		// lease and 250 ms of slack. The slack must outlast two followers
		// of a majority being late together on a loaded host while another
		// is cut off, or a healthy leader's lease lapses; four heartbeats
		// per timeout would leave only 150 ms. The simulator test
		// TestQuorumLeaseSlack (election/sim) pins the slack at these
		// timings.
		hb = min(hb, max(1, lt/6))
		lease = max(hb+1, lt-max(1, lt/4))
	}
	return election.Config{
		ID: c.Self.ID, Priority: c.Self.Priority, Term: term,
		HeartbeatTicks:     hb,
		LeaderTimeoutTicks: lt,
		JitterTicks:        max(1, lt/4),
		// An Answer comes back in one round trip. Allow AnswerTimeout, or a
		// heartbeat interval if shorter: not the interval itself, which is
		// set long to keep the idle cost low, since a bully node waits this
		// long when an Election to a dead higher node is neither answered
		// nor reported failed (its connection half torn down).
		AnswerTimeoutTicks: min(hb, ticks(AnswerTimeout, c.Tick)),
		// A Coordinator (or quorum acks) should follow within a timeout.
		ElectionTimeoutTicks: lt,
		HopTicks:             1,
		Quorum:               c.Quorum,
		LeaseTicks:           lease,
		Preempt:              c.Preempt,
		BootstrapExpect:      c.BootstrapExpect,
		// A restarted process without a data dir starts from term 0 like a
		// first start: in quorum mode it holds off after every start.
		Volatile: c.Store.Volatile(),
	}
}
