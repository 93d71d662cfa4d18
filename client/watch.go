package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// Event is one item of a Watch channel: a leadership event, or (Err set) a
// note that the stream broke or that no endpoint answered; Watch keeps
// trying after either.
type Event struct {
	Leader   LeaderInfo // as the node at Endpoint sees it
	Seq      uint64     // the server's sequence number on this stream (from 1)
	Dropped  uint64     // changes the server skipped since the previous event (slow reader)
	Endpoint string     // the endpoint the event came from
	// Resumed marks the first event of a stream that replaced a broken
	// one: it is that node's current view, at or after the last term seen.
	Resumed bool
	// Err is set on an error event (Leader is zero then): a *NoEndpointError
	// when a whole pass over the endpoints failed, or the reason a stream
	// ended.
	Err error
}

// Watch streams leadership changes until ctx ends, then closes the channel.
// The first event is the current leader as the first answering endpoint
// sees it. When the stream breaks, Watch tries the endpoints again in
// order, resuming after the highest leader term it has delivered (the server then
// skips views older than that term); after a pass in which no endpoint
// answered it waits (exponential backoff with jitter) before the next one.
// Read the channel promptly: while it is not read, the server drops events
// for this watcher (counted in Dropped) but the newest state always comes.
// In quorum mode an event's Self follows the node's lease: the node sends
// an event when its lease starts and when it lapses by the clock, so Self
// is never true longer than the node's IsLeader answer would be.
func (c *Client) Watch(ctx context.Context) <-chan Event {
	out := make(chan Event)
	go c.watch(ctx, out, "")
	return out
}

// Observe is Watch of a named election: its leadership (with the leading
// candidacy's Value) as the answering node sees it, candidate or not.
func (c *Client) Observe(ctx context.Context, election string) <-chan Event {
	out := make(chan Event)
	go c.watch(ctx, out, election)
	return out
}

func (c *Client) watch(ctx context.Context, out chan<- Event, election string) {
	defer close(out)
	emit := func(ev Event) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var (
		after   Term // the highest term of a leader delivered
		streams int  // streams that delivered an event
		wait    = c.opts.backoffMin
	)
	for ctx.Err() == nil && !c.isClosed() {
		var tried []EndpointError
		progressed := false
		for _, ep := range c.eps {
			err := c.ready(ctx, ep)
			got := 0
			if err == nil {
				got, err = c.stream(ctx, ep, election, &after, streams > 0, emit)
			}
			if ctx.Err() != nil || c.isClosed() {
				return
			}
			if got > 0 {
				streams++
				progressed = true
				if !emit(Event{Endpoint: ep.addr, Err: fmt.Errorf("watch stream from %s ended: %w", ep.addr, err)}) {
					return
				}
				break // start over from the first endpoint
			}
			tried = append(tried, EndpointError{Endpoint: ep.addr, Err: err})
		}
		if progressed {
			wait = c.opts.backoffMin
			continue
		}
		if !emit(Event{Err: &NoEndpointError{Tried: tried}}) {
			return
		}
		// Full jitter in [wait/2, wait), then double.
		d := wait/2 + rand.N(wait/2+1)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, c.opts.backoffMax)
	}
}

// stream runs one WatchLeader stream until it fails; it returns how many
// events it delivered.
func (c *Client) stream(ctx context.Context, ep *endpoint, election string, after *Term, resumed bool, emit func(Event) bool) (int, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := ep.api.WatchLeader(sctx, &electordv1.WatchLeaderRequest{AfterTerm: uint64(*after), Election: election})
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		p, err := s.Recv()
		if err != nil {
			return n, err
		}
		ev := Event{Leader: leaderFromProto(p.GetLeader()), Seq: p.GetSeq(), Dropped: p.GetDropped(), Endpoint: ep.addr, Resumed: resumed && n == 0}
		// Only a leader's term moves the resume point: a no-leader event
		// carries the highest term its node knows (a campaign's, say), which
		// the leader finally agreed on may not reach.
		if ev.Leader.HasLeader() && ev.Leader.Term > *after {
			*after = ev.Leader.Term
		}
		if !emit(ev) {
			return n, ctx.Err()
		}
		n++
	}
}
