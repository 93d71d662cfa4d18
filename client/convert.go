package client

import (
	"time"

	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// leaderFromProto and membersFromProto turn the API's messages into the
// client's types; a nil message is the zero value.
func leaderFromProto(p *electordv1.LeaderInfo) LeaderInfo {
	if p == nil {
		return LeaderInfo{}
	}
	var since time.Time
	if ns := p.GetSinceUnixNano(); ns != 0 {
		since = time.Unix(0, ns).UTC()
	}
	return LeaderInfo{
		ID: NodeID(p.GetId()), Name: p.GetName(), Address: p.GetAddress(), Term: Term(p.GetTerm()),
		Since: since, Self: p.GetSelf(), State: p.GetState(), Election: p.GetElection(), Value: p.GetValue(),
	}
}

func membersFromProto(ps []*electordv1.MemberStatus) []Member {
	out := make([]Member, len(ps))
	for i, p := range ps {
		out[i] = Member{
			ID: NodeID(p.GetId()), Name: p.GetName(), Priority: p.GetPriority(), PeerAddr: p.GetPeerAddress(),
			APIAddr: p.GetApiAddress(), Alive: p.GetAlive(), Role: p.GetRole(), Term: Term(p.GetTerm()), Algorithm: p.GetAlgorithm(),
		}
	}
	return out
}
