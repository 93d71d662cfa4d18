package daemon

import (
	"sync"
	"time"

	"github.com/electord/electord/membership"
	"github.com/electord/electord/node"
)

// gossip adapts a *membership.Membership (memberlist) to node.Membership,
// converting its events as they are read: one goroutine holds at most one
// event, so memberlist still never waits for the node and no event is lost
// while it runs.
type gossip struct {
	m      *membership.Membership
	events chan node.MemberEvent
	done   chan struct{} // closed by Shutdown
	once   sync.Once
}

var _ node.SyncReporter = (*gossip)(nil)

func adaptGossip(m *membership.Membership) *gossip {
	g := &gossip{m: m, events: make(chan node.MemberEvent), done: make(chan struct{})}
	go g.forward()
	return g
}

func (g *gossip) forward() {
	defer close(g.events)
	for ev := range g.m.Events() {
		select {
		case g.events <- memberEvent(ev):
		case <-g.done:
			return
		}
	}
}

func (g *gossip) Events() <-chan node.MemberEvent { return g.events }

// ReportsSynced: membership.RetryJoin reports Synced, and the daemon
// always calls it.
func (g *gossip) ReportsSynced() {}

func (g *gossip) Leave(timeout time.Duration) error { return g.m.Leave(timeout) }

// Shutdown stops gossip (and its retry-join); events not yet read are
// discarded.
func (g *gossip) Shutdown() error {
	g.once.Do(func() { close(g.done) })
	return g.m.Shutdown()
}

func memberEvent(ev membership.Event) node.MemberEvent {
	return node.MemberEvent{Type: memberEventType(ev.Type), Member: node.Meta(ev.Member), Yield: ev.Yield, Detail: ev.Detail}
}

func memberEventType(t membership.EventType) node.MemberEventType {
	switch t {
	case membership.Join:
		return node.MemberJoin
	case membership.Update:
		return node.MemberUpdate
	case membership.Leave:
		return node.MemberLeave
	case membership.Dead:
		return node.MemberDead
	case membership.Conflict:
		return node.MemberConflict
	case membership.Synced:
		return node.MemberSynced
	}
	return 0
}
