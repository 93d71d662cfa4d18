package node

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/electord/electord/transport"
)

// Config configures a node's loop. Durations are turned into ticks.
type Config struct {
	Self      Meta
	Algorithm string // a name registered in election/algorithms
	// Tick is the loop's clock period (the tick key). Required, as are the
	// two heartbeat timings: config.Default has their values, and
	// config.Validate checks them against each other.
	Tick time.Duration
	// HeartbeatInterval: followers heartbeat the leader this often
	// (heartbeat-interval).
	HeartbeatInterval time.Duration
	// HeartbeatTimeout: a follower suspects its leader after this long without
	// an answer (heartbeat-timeout).
	HeartbeatTimeout time.Duration
	Quorum           int
	Preempt          bool
	// BootstrapExpect: see election.Config.BootstrapExpect.
	BootstrapExpect int
	// CandidateProbe is the candidate probe's URL ("" without one): the
	// node does not stand until CandidateProbed says the probe passes.
	CandidateProbe string
	// Spread tunes the rebalancing of placement spread's leaderships
	// (named_rebalance.go); the zero value turns it off.
	Spread SpreadConfig
	// Store persists the term; nil keeps it in memory.
	Store *TermStore
	// NewMembership starts gossip; called at start and on Revive.
	NewMembership func() (Membership, error)
	// Transport sends peer messages; it reports the sends it could not
	// deliver to Inbox, its transport.Receiver.
	Transport transport.Transport
	// Inbox is what the node receives: messages from peers and failed sends.
	Inbox *Inbox
	// Exit terminates the process (electctl kill --exit). nil: Exit does nothing.
	Exit   func()
	Logger *slog.Logger
}

// check reports every configured timing that is missing, naming the field
// and its config key; then it sets what is optional: a nil Logger discards,
// a nil Store keeps the term in memory.
func (c *Config) check() error {
	var errs []error
	for _, f := range []struct {
		field, key string
		v          time.Duration
	}{{"Tick", "tick", c.Tick}, {"HeartbeatInterval", "heartbeat-interval", c.HeartbeatInterval},
		{"HeartbeatTimeout", "heartbeat-timeout", c.HeartbeatTimeout}} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("node: Config.%s (%s) must be positive, got %v", f.field, f.key, f.v))
		}
	}
	if err := c.Spread.check(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Store == nil {
		c.Store, _ = OpenTermStore("")
	}
	return nil
}

// namedInboxSize bounds an inbox's queued messages of the named
// elections: a burst of one message per election from each peer (their
// apps starting together, a mass failover's announcements) fits whole
// at 10,000 elections on five nodes, or 16,000 on four. Queued, each holds
// 208 bytes plus its strings, which namedInboxBytes bounds.
const namedInboxSize = 65536

// namedInboxBytes bounds the names and values the named queue holds
// (election names of up to 128 bytes, values of up to 1,024): at most
// 16 MiB, with the messages themselves about 30 MiB in all.
const namedInboxBytes = 16 << 20

// inboxSize bounds an inbox's queued inbound messages of the default
// election. Default 4096.
func inboxSize(size int) int {
	if size == 0 {
		return 4096
	}
	return size
}
