package node

import (
	"log/slog"
	"time"

	"github.com/electord/electord/transport"
)

// Config configures a node's loop. Durations are turned into ticks.
type Config struct {
	Self      Meta
	Algorithm string // a name registered in election/algorithms
	// Tick is the loop's clock period. Default 10ms.
	Tick time.Duration
	// HeartbeatInterval: followers heartbeat the leader this often. Default 50ms.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout: a follower suspects its leader after this long without
	// an answer. Default 250ms.
	HeartbeatTimeout time.Duration
	Quorum           int
	Preempt          bool
	// BootstrapExpect: see election.Config.BootstrapExpect.
	BootstrapExpect int
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

func (c *Config) defaults() {
	if c.Tick == 0 {
		c.Tick = 10 * time.Millisecond
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 50 * time.Millisecond
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = 250 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Store == nil {
		c.Store, _ = OpenTermStore("")
	}
}

// inboxSize bounds an inbox's queued inbound messages. Default 4096.
func inboxSize(size int) int {
	if size == 0 {
		return 4096
	}
	return size
}
