package client

import (
	"context"
	"sync"

	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// CampaignEvent is one change of a candidacy: Event is "candidate",
// "leader" (it leads; Leader.Term is its fencing token) or "follower"
// (another candidacy leads, Leader.Value says whose).
type CampaignEvent struct {
	// Election is the election the event is of (as Leader.Election).
	Election string
	Event    string
	Leader   LeaderInfo
	// QueuedBehind counts the apps ahead of this one on its node (0: the
	// node stands for it).
	QueuedBehind int
}

// CampaignOption sets an option of Campaign.
type CampaignOption func(*electordv1.CampaignRequest)

// WithPriority ranks the candidacy's node in the election (higher wins).
func WithPriority(p int64) CampaignOption {
	return func(r *electordv1.CampaignRequest) { r.Priority = p }
}

// WithPlacement sets how the election's candidates are ranked: "sticky"
// (the default) by priority and a leader keeps its leadership; "spread"
// by a hash of (election, node), so that leaderships over many elections
// are balanced over the nodes. Any other value is refused
// (InvalidArgument).
func WithPlacement(p string) CampaignOption {
	return func(r *electordv1.CampaignRequest) { r.Placement = p }
}

// Campaign is an application's candidacy in a named election. It lasts
// exactly as long as its stream to the node: Close ends it, and so does a
// broken stream (the node may already have handed the leadership on), so
// Campaign never stands again by itself: a new candidacy is a new
// leadership with its own token.
type Campaign struct {
	events chan CampaignEvent
	done   chan struct{}
	cancel context.CancelFunc
	// api and id reach the candidacy on its node (Proclaim).
	api      electordv1.ElectorClient
	election string
	id       uint64

	mu      sync.Mutex
	last    CampaignEvent
	err     error
	closing bool
}

// Campaign stands value in the named election through the first endpoint
// that answers, and returns once that node has registered the candidacy
// (its first event, "candidate", is on Events). It fails at once for a bad
// name or value (InvalidArgument) or a node that runs no named elections.
func (c *Client) Campaign(ctx context.Context, election, value string, opts ...CampaignOption) (*Campaign, error) {
	req := &electordv1.CampaignRequest{Election: election, Value: value}
	for _, o := range opts {
		o(req)
	}
	return onFirstEndpoint(ctx, c, func(ep *endpoint) (*Campaign, error) { return startCampaign(ep, req) })
}

// onFirstEndpoint opens a campaign's stream with start on the first
// endpoint that answers: an endpoint that cannot be reached is passed
// over, any other refusal is the answer.
func onFirstEndpoint[T any](ctx context.Context, c *Client, start func(*endpoint) (T, error)) (T, error) {
	var zero T
	var tried []EndpointError
	for _, ep := range c.eps {
		if c.isClosed() {
			return zero, ErrClosed
		}
		err := c.ready(ctx, ep)
		if err == nil {
			var v T
			v, err = start(ep)
			if err == nil || !unreachable(err) {
				return v, err
			}
		}
		tried = append(tried, EndpointError{Endpoint: ep.addr, Err: err})
		if ctx.Err() != nil {
			return zero, &NoEndpointError{Tried: tried, Ctx: ctx.Err()}
		}
	}
	return zero, &NoEndpointError{Tried: tried}
}

func startCampaign(ep *endpoint, req *electordv1.CampaignRequest) (*Campaign, error) {
	// The stream outlives the ctx of the call that opened it: it ends
	// with Close.
	sctx, cancel := context.WithCancel(context.Background())
	s, err := ep.api.Campaign(sctx, req)
	if err != nil {
		cancel()
		return nil, err
	}
	first, err := s.Recv()
	if err != nil {
		cancel()
		return nil, err
	}
	cp := &Campaign{events: make(chan CampaignEvent, 16), done: make(chan struct{}), cancel: cancel,
		api: ep.api, election: req.GetElection(), id: first.GetCandidacy()}
	cp.deliver(campaignEventFromProto(first))
	go func() {
		defer close(cp.done)
		defer close(cp.events)
		for {
			p, err := s.Recv()
			if err != nil {
				cp.mu.Lock()
				if !cp.closing {
					cp.err = err
				}
				cp.mu.Unlock()
				return
			}
			cp.deliver(campaignEventFromProto(p))
		}
	}()
	return cp, nil
}

func campaignEventFromProto(p *electordv1.CampaignEvent) CampaignEvent {
	return CampaignEvent{Election: p.GetLeader().GetElection(), Event: p.GetEvent(), Leader: leaderFromProto(p.GetLeader()), QueuedBehind: int(p.GetQueuedBehind())}
}

// deliver records ev and queues it, dropping the oldest queued event if the
// reader is behind (Leading always says the newest).
func (cp *Campaign) deliver(ev CampaignEvent) {
	cp.mu.Lock()
	cp.last = ev
	cp.mu.Unlock()
	select {
	case cp.events <- ev:
		return
	default:
	}
	select {
	case <-cp.events:
	default:
	}
	cp.events <- ev
}

// Events delivers the candidacy's changes; it is closed when the candidacy
// ends. A slow reader loses the oldest events, never the newest.
func (cp *Campaign) Events() <-chan CampaignEvent { return cp.events }

// Leading reports whether the candidacy leads now, as its node last said,
// and the leadership (its Term is the fencing token).
func (cp *Campaign) Leading() (LeaderInfo, bool) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.err != nil || cp.closing {
		return cp.last.Leader, false
	}
	return cp.last.Leader, cp.last.Event == "leader"
}

// Done is closed when the candidacy has ended.
func (cp *Campaign) Done() <-chan struct{} { return cp.done }

// Err says why the candidacy ended by itself (the stream broke); nil while
// it lasts or after Close.
func (cp *Campaign) Err() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.err
}

// Proclaim changes the candidacy's value without an election (etcd's
// Proclaim): if it leads, observers see the new value with the same term.
func (cp *Campaign) Proclaim(ctx context.Context, value string) error {
	_, err := cp.api.Proclaim(ctx, &electordv1.ProclaimRequest{Election: cp.election, Candidacy: cp.id, Value: value})
	return err
}

// Close ends the candidacy: if it led, its node hands the leadership to
// another candidate. It waits until the stream has ended.
func (cp *Campaign) Close() error {
	cp.mu.Lock()
	cp.closing = true
	cp.mu.Unlock()
	cp.cancel()
	<-cp.done
	return nil
}
