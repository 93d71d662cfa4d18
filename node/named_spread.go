package node

import (
	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
)

// standingPriority is the priority c stands with on node self: the app's
// own under sticky placement; under spread, the app's priority in the high
// half and the rendezvous weight of (election, self) in the low half
// (named.SpreadRank), so that the candidates' machines, which elect the
// highest-ranked live candidate, elect each election's top-ranked node by
// the hash among those of the highest priority. It is what the node's
// Candidacy says and what its machine stands with.
func (c *Candidacy) standingPriority(self election.NodeID) int64 {
	if c.Placement == PlacementSpread {
		return named.SpreadRank(c.Election, self, c.Priority)
	}
	return c.Priority
}

// spreadPriority is the app's priority within a spread rank.
func spreadPriority(rank int64) int64 { return rank >> 32 }
