package daemon

import (
	"testing"

	"github.com/electord/electord/election"
	"github.com/electord/electord/membership"
	"github.com/electord/electord/node"
)

func TestMemberEventKeepsEveryField(t *testing.T) {
	for typ := membership.Join; typ <= membership.Synced; typ++ {
		in := membership.Event{Type: typ, Yield: true, Detail: "d",
			Member: membership.Meta{ID: 7, Name: "n", Priority: -3, PeerAddr: "p", APIAddr: "a", HTTPAddr: "h"}}
		got := memberEvent(in)
		want := node.MemberEvent{Yield: true, Detail: "d",
			Member: node.Meta{ID: election.NodeID(7), Name: "n", Priority: -3, PeerAddr: "p", APIAddr: "a", HTTPAddr: "h"}}
		want.Type = got.Type
		if got != want {
			t.Errorf("%v: got %+v, want %+v", typ, got, want)
		}
		if got.Type.String() != typ.String() {
			t.Errorf("membership %v became node %v", typ, got.Type)
		}
	}
}
