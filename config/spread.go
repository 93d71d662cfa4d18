package config

import "time"

// Placement spread's rebalancing (docs/ELECTIONS.md, "Placement").
const (
	// DefaultSpreadImbalance: leaderships are moved while the most a live
	// candidate node leads is more than 1.1 times the least (Kafka's
	// leader.imbalance.per.broker.percentage, 10%).
	DefaultSpreadImbalance = 0.1
	// DefaultSpreadRebalanceInterval: a node moves leaderships at most
	// this often.
	DefaultSpreadRebalanceInterval = 250 * time.Millisecond
	// DefaultSpreadRebalanceBatch: a node moves at most this many
	// leaderships per interval, 64 a second at the default interval: a
	// node returning to 5 nodes and 10,000 elections takes its 2,000 back
	// from the four others in about 8 s. Each is a handover (one
	// TimeoutNow, then the receiver's claim: a Coordinator and a Candidacy
	// to every peer), so four givers feeding one receiver at once keep it
	// at 128 messages per peer, half a peer's send queue (256).
	DefaultSpreadRebalanceBatch = 16
)

// Bounds of the spread-* keys. Looking more often than a tick only adds
// load. Each handover in a batch makes its receiver claim, with a
// Coordinator and a Candidacy to every peer; beyond 64, a receiver that
// several givers feed in one interval overflows its peers' send queues
// (256 messages), and what does not fit is lost until resent.
const (
	MinSpreadRebalanceInterval = 10 * time.Millisecond
	MaxSpreadRebalanceBatch    = 64
)

// validateSpread checks the spread-* keys; bad records an error naming the
// key.
func (c Config) validateSpread(bad func(key, format string, a ...any)) {
	if !(c.SpreadImbalance > 0 && c.SpreadImbalance <= 1) {
		bad("spread-imbalance", "must be above 0 and at most 1 (a fraction: 0.1 moves leaderships while the most a node leads is over 1.1 times the least), got %v", c.SpreadImbalance)
	}
	if c.SpreadRebalanceInterval < MinSpreadRebalanceInterval {
		bad("spread-rebalance-interval", "must be at least %v, got %v", MinSpreadRebalanceInterval, c.SpreadRebalanceInterval)
	}
	if c.SpreadRebalanceBatch < 1 || c.SpreadRebalanceBatch > MaxSpreadRebalanceBatch {
		bad("spread-rebalance-batch", "must be from 1 to %d, got %d", MaxSpreadRebalanceBatch, c.SpreadRebalanceBatch)
	}
}
