package node

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/electord/electord/election/named"
)

// Campaign events, as the sidecar's SSE event names and gRPC's
// CampaignEvent.event say them.
const (
	EventCandidate = "candidate" // standing (or queued), no leader known
	EventLeader    = "leader"    // this candidacy leads
	EventFollower  = "follower"  // another candidacy leads
)

// candidacyBuffer is how many events a slow reader may fall behind before
// the oldest is dropped; the newest, which says the current state, is
// always kept.
const candidacyBuffer = 16

// Candidacy is one application's standing in a named election through this
// node. It lasts until Close, which the API calls when the app's stream
// ends, however it ends.
type Candidacy struct {
	// ID is set when the node has registered it.
	ID       named.ID
	Election string
	Value    string
	Priority int64
	// Placement is PlacementSticky or PlacementSpread.
	Placement string

	n      *Node
	events chan CandidacyEvent // nil in a CandidacySet (set says)
	last   CandidacyEvent      // the last event offered (written by the loop; under set.mu in a set)
	sent   bool
	once   sync.Once
	// set, when not nil, holds this candidacy with others on one stream:
	// its events go to the set's queue (CandidacySet), not to a channel
	// of its own. queued (under set.mu): last is in that queue, untaken.
	set    *CandidacySet
	queued bool
}

// CandidacyEvent is one change of a candidacy's standing.
type CandidacyEvent struct {
	// Event is EventCandidate, EventLeader or EventFollower.
	Event string
	// Leader is the election's leadership as this node sees it; when Event
	// is EventLeader, Leader.Term is the candidacy's fencing token.
	Leader LeaderInfo
	// QueuedBehind counts the local apps ahead of this candidacy (0: the
	// node stands for it).
	QueuedBehind int
	// Candidacy is the candidacy's id on its node (for Proclaim).
	Candidacy named.ID
}

// Placements: how an election's candidates are ranked. Sticky (the
// default, also spelled "") ranks them by priority, then node id, and a
// leader keeps its leadership while it lives. Spread ranks them by a hash
// of (election, node), so a node's leaderships over many elections are
// balanced against the others'.
const (
	PlacementSticky = "sticky"
	PlacementSpread = "spread"
)

// CheckPlacement accepts "", "sticky" and "spread".
func CheckPlacement(p string) error {
	switch p {
	case "", PlacementSticky, PlacementSpread:
		return nil
	}
	return fmt.Errorf("placement %q: want %q or %q", p, PlacementSticky, PlacementSpread)
}

// CampaignOptions says what a candidacy stands for.
type CampaignOptions struct {
	Election  string
	Value     string
	Priority  int64
	Placement string // "" or PlacementSticky, or PlacementSpread
}

// Campaign stands value in the named election through this node until the
// returned Candidacy is closed. Apps campaigning for one name on one node
// queue in arrival order; the node stands for the first.
func (n *Node) Campaign(ctx context.Context, election, value string, priority int64) (*Candidacy, error) {
	return n.CampaignWith(ctx, CampaignOptions{Election: election, Value: value, Priority: priority})
}

// CampaignWith is Campaign with every option.
func (n *Node) CampaignWith(ctx context.Context, o CampaignOptions) (*Candidacy, error) {
	election, value := o.Election, o.Value
	if err := named.CheckName(election); err != nil {
		return nil, err
	}
	if err := named.CheckValue(value); err != nil {
		return nil, err
	}
	if err := CheckPlacement(o.Placement); err != nil {
		return nil, err
	}
	if o.Placement == PlacementSpread {
		if err := named.CheckSpreadPriority(o.Priority); err != nil {
			return nil, err
		}
	}
	placement := o.Placement
	if placement == "" {
		placement = PlacementSticky
	}
	c := &Candidacy{Election: election, Value: value, Priority: o.Priority, Placement: placement, n: n, events: make(chan CandidacyEvent, candidacyBuffer)}
	err := n.do(ctx, func() error {
		if n.killed {
			return ErrKilled
		}
		if err := n.stand(c, 1); err != nil {
			return err
		}
		c.push(CandidacyEvent{Event: EventCandidate, Leader: LeaderInfo{Election: election, State: StateNoLeader}, Candidacy: c.ID})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Events delivers the candidacy's changes, the first an EventCandidate. It
// is closed when the candidacy ends.
func (c *Candidacy) Events() <-chan CandidacyEvent { return c.events }

// Close ends the candidacy: if it led, the node hands the leadership over
// to another node's candidate. Safe to call more than once and from any
// goroutine.
func (c *Candidacy) Close() error {
	var err error
	c.once.Do(func() {
		err = c.n.do(context.Background(), func() error {
			c.n.withdrawCandidacy(c.ID)
			return nil
		})
	})
	return err
}

// offer tells the candidacy the election's leadership after a change, if
// what it says for this candidacy changed. Called by the loop.
func (c *Candidacy) offer(li LeaderInfo, head bool, pos int) {
	ev := CandidacyEvent{Event: EventCandidate, Leader: li, QueuedBehind: pos}
	switch {
	case li.Self && head:
		ev.Event = EventLeader
	case li.ID != 0:
		ev.Event = EventFollower
	}
	ev.Candidacy = c.ID
	if c.sent && ev.Event == c.last.Event && ev.QueuedBehind == c.last.QueuedBehind && ev.Leader.ID == c.last.Leader.ID &&
		ev.Leader.Term == c.last.Leader.Term && ev.Leader.Value == c.last.Leader.Value {
		return
	}
	c.push(ev)
}

// push sends ev (see pushLatest).
func (c *Candidacy) push(ev CandidacyEvent) {
	if c.set != nil {
		c.set.push(c, ev)
		return
	}
	c.last, c.sent = ev, true
	pushLatest(c.events, ev)
}

// pushLatest sends v on ch, dropping the oldest value queued if the reader
// is behind, so the newest is always delivered and the sender never
// waits. Only the loop sends on such a channel, so the second send cannot
// block.
func pushLatest[T any](ch chan T, v T) {
	select {
	case ch <- v:
		return
	default:
	}
	select {
	case <-ch:
	default:
	}
	ch <- v
}

// ErrNotStanding refuses a Proclaim in an election where this node has no
// candidacy (or not the one named).
var ErrNotStanding = errors.New("node: no such candidacy in that election")

// Proclaim changes a candidacy's value without an election, as etcd's
// Proclaim does: the leadership and its term stay, and every node shows the
// new value once this node's word reaches it. id 0 names the candidacy
// this node stands for in the election (the head of its queue).
func (n *Node) Proclaim(ctx context.Context, election string, id named.ID, value string) error {
	if err := named.CheckValue(value); err != nil {
		return err
	}
	return n.do(ctx, func() error {
		if id == 0 {
			head, ok := n.named.queues.Head(election)
			if !ok {
				return ErrNotStanding
			}
			id = head.ID
		}
		c := n.named.subs[id]
		if c == nil || c.Election != election {
			return ErrNotStanding
		}
		head, err := n.named.queues.SetValue(id, value)
		if err != nil {
			return err
		}
		c.Value = value
		if head {
			n.sendCandidacy(election, 0)
		}
		n.named.touch(election)
		return nil
	})
}

// Proclaim changes this candidacy's value (see Node.Proclaim).
func (c *Candidacy) Proclaim(ctx context.Context, value string) error {
	return c.n.Proclaim(ctx, c.Election, c.ID, value)
}
