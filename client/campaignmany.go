package client

import (
	"context"
	"sync"

	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// Campaigns is an application's candidacies in many named elections, held
// on one stream to one node (CampaignMany): they all last exactly as long
// as the stream. Close ends them all; so does a broken stream, and
// Campaigns never stands again by itself.
//
// Its state is one entry per election: the newest event of each. Events
// delivers the changes in the order they came; a reader that falls behind
// loses intermediate changes of an election, never its newest state, and
// never holds up the stream (Leading stays current).
type Campaigns struct {
	cancel context.CancelFunc
	done   chan struct{} // the stream ended
	fed    chan struct{} // the feeder ended (events closed)
	stop   chan struct{} // Close: stop feeding
	events chan CampaignEvent
	wake   chan struct{}

	mu      sync.Mutex
	state   map[string]*campaignsEntry
	pending []string // elections with an event not yet on events, in order
	err     error
	closing bool
	once    sync.Once
}

type campaignsEntry struct {
	last   CampaignEvent
	queued bool
}

// CampaignMany stands value in every listed election through the first
// endpoint that answers, on one stream, and returns once that node has
// registered every candidacy (each election's "candidate" event is on
// Events). The options are Campaign's and apply to every election. The
// list is checked whole first: a bad name, a name listed twice or too many
// names (100,000 at most) fails at once with InvalidArgument naming the
// first offender by index and name, and nothing stands.
func (c *Client) CampaignMany(ctx context.Context, elections []string, value string, opts ...CampaignOption) (*Campaigns, error) {
	one := &electordv1.CampaignRequest{Value: value}
	for _, o := range opts {
		o(one)
	}
	req := &electordv1.CampaignManyRequest{Elections: elections, Value: value, Priority: one.GetPriority(), Placement: one.GetPlacement()}
	return onFirstEndpoint(ctx, c, func(ep *endpoint) (*Campaigns, error) { return startCampaigns(ep, req) })
}

func startCampaigns(ep *endpoint, req *electordv1.CampaignManyRequest) (*Campaigns, error) {
	// The stream outlives the ctx of the call that opened it: it ends
	// with Close.
	sctx, cancel := context.WithCancel(context.Background())
	s, err := ep.api.CampaignMany(sctx, req)
	if err != nil {
		cancel()
		return nil, err
	}
	cs := &Campaigns{cancel: cancel, done: make(chan struct{}), fed: make(chan struct{}), stop: make(chan struct{}),
		events: make(chan CampaignEvent), wake: make(chan struct{}, 1), state: make(map[string]*campaignsEntry, len(req.GetElections()))}
	// The node sends every election's first event before anything else:
	// read until each has one, so that a caller sees every candidacy
	// registered when CampaignMany returns.
	for len(cs.state) < len(req.GetElections()) {
		p, err := s.Recv()
		if err != nil {
			cancel()
			return nil, err
		}
		cs.deliver(p.GetEvents())
	}
	go cs.feed()
	go func() {
		defer close(cs.done)
		defer cs.signal()
		for {
			p, err := s.Recv()
			if err != nil {
				cs.mu.Lock()
				if !cs.closing {
					cs.err = err
				}
				cs.mu.Unlock()
				return
			}
			cs.deliver(p.GetEvents())
		}
	}()
	return cs, nil
}

// deliver records a batch of events: each election's newest, and the
// order in which elections changed.
func (cs *Campaigns) deliver(ps []*electordv1.CampaignEvent) {
	cs.mu.Lock()
	for _, p := range ps {
		ev := campaignEventFromProto(p)
		e := cs.state[ev.Election]
		if e == nil {
			e = &campaignsEntry{}
			cs.state[ev.Election] = e
		}
		e.last = ev
		if !e.queued {
			e.queued = true
			cs.pending = append(cs.pending, ev.Election)
		}
	}
	cs.mu.Unlock()
	cs.signal()
}

func (cs *Campaigns) signal() {
	select {
	case cs.wake <- struct{}{}:
	default:
	}
}

// feed moves the pending events onto events, one per election changed,
// until the stream has ended and all are delivered, or Close.
func (cs *Campaigns) feed() {
	defer close(cs.fed)
	defer close(cs.events)
	var batch []CampaignEvent
	for {
		cs.mu.Lock()
		batch = batch[:0]
		for _, name := range cs.pending {
			e := cs.state[name]
			e.queued = false
			batch = append(batch, e.last)
		}
		cs.pending = cs.pending[:0]
		cs.mu.Unlock()
		for _, ev := range batch {
			select {
			case cs.events <- ev:
			case <-cs.stop:
				return
			}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-cs.wake:
		case <-cs.done:
			cs.mu.Lock()
			empty := len(cs.pending) == 0
			cs.mu.Unlock()
			if empty {
				return
			}
		case <-cs.stop:
			return
		}
	}
}

// Events delivers the candidacies' changes, each naming its election (the
// first of each is "candidate"); it is closed when the candidacies have
// ended and their last events are delivered, or at Close.
func (cs *Campaigns) Events() <-chan CampaignEvent { return cs.events }

// Leading reports whether the candidacy in election leads now, as its node
// last said, and the leadership (its Term is the fencing token).
func (cs *Campaigns) Leading(election string) (LeaderInfo, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	e := cs.state[election]
	if e == nil {
		return LeaderInfo{Election: election}, false
	}
	if cs.err != nil || cs.closing {
		return e.last.Leader, false
	}
	return e.last.Leader, e.last.Event == "leader"
}

// Leaderships lists the elections whose candidacy leads now, as the node
// last said, with their leaderships (unsorted).
func (cs *Campaigns) Leaderships() []LeaderInfo {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.err != nil || cs.closing {
		return nil
	}
	var out []LeaderInfo
	for _, e := range cs.state {
		if e.last.Event == "leader" {
			out = append(out, e.last.Leader)
		}
	}
	return out
}

// Done is closed when the candidacies have ended (the stream ended).
func (cs *Campaigns) Done() <-chan struct{} { return cs.done }

// Err says why the candidacies ended by themselves (the stream broke); nil
// while they last or after Close.
func (cs *Campaigns) Err() error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.err
}

// Close ends every candidacy: the node hands each leadership they held to
// another candidate. It waits until the stream has ended.
func (cs *Campaigns) Close() error {
	cs.mu.Lock()
	cs.closing = true
	cs.mu.Unlock()
	cs.cancel()
	cs.once.Do(func() { close(cs.stop) })
	<-cs.done
	<-cs.fed
	return nil
}
