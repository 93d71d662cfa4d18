package node

import (
	"time"

	"github.com/electord/electord/election/named"
)

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
