package node

import (
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
)

// standOf is what a peer's Candidacy says of its standing, as the table
// keeps it: one place, so a copy that says the same is recognised as such
// (unchangedCandidacy) by every field the table holds.
func standOf(m election.Message) named.Stand {
	return named.Stand{Priority: m.FromRank.Priority, Value: m.Value, LeaderTerm: m.Term, LeaderSince: m.LeaderSince}
}

// leaderSince is when a peer's leadership of a named election began, as
// its Candidacy said, by the leader's own clock (an observer runs no
// machine that saw the change); zero when the peer did not say (an older
// node).
func leaderSince(s named.Stand) time.Time {
	if s.LeaderSince <= 0 {
		return time.Time{}
	}
	return time.Unix(0, s.LeaderSince)
}
