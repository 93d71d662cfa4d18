package apitest

import (
	"context"
	"testing"
	"time"

	"github.com/electord/electord/api"
	"github.com/electord/electord/node"
	"github.com/electord/electord/transport"
)

// NamedBackend adapts a real *node.Node to api.Backend with named
// elections, as the daemon does.
type NamedBackend struct{ *node.Node }

var _ api.ElectionBackend = NamedBackend{}

func (b NamedBackend) Subscribe() (api.Subscription, error) { return b.Node.Subscribe(), nil }

// noGossip is a Membership that never reports another member.
type noGossip struct{}

func (noGossip) Events() <-chan node.MemberEvent { return nil }
func (noGossip) Leave(time.Duration) error       { return nil }
func (noGossip) Shutdown() error                 { return nil }

// NamedNode runs a real node alone (in-memory transport, no other member)
// until the test ends: it leads every named election an app campaigns in
// through it, at once.
func NamedNode(t testing.TB) NamedBackend {
	t.Helper()
	self := node.Meta{ID: 1, Name: "node-1"}
	in := node.NewInbox(0)
	n, err := node.New(node.Config{Self: self, Algorithm: "bully", Transport: transport.NewNetwork().Join(self.ID, in), Inbox: in,
		Tick: 10 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 250 * time.Millisecond,
		NewMembership: func() (node.Membership, error) { return noGossip{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go n.Run(ctx)
	t.Cleanup(func() { cancel(); <-n.Done() })
	return NamedBackend{n}
}

// CampaignAll campaigns in every name with value (the candidacies end with
// the test) and waits until the node leads each of them.
func (b NamedBackend) CampaignAll(t testing.TB, value string, names ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, name := range names {
		c, err := b.Campaign(ctx, name, value, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, name := range names {
		for li, _ := b.ElectionLeader(name); !li.Self; li, _ = b.ElectionLeader(name) {
			if time.Now().After(deadline) {
				t.Fatalf("the lone node does not lead %s after 10s: %+v", name, li)
			}
			time.Sleep(5 * time.Millisecond) // polling interval
		}
	}
}
