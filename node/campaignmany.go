package node

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/electord/electord/election/named"
)

// MaxCampaignElections bounds the elections of one CampaignMany (so one
// request, and one stream, of the API): a candidacy costs its node state
// (a queue entry, a machine, a table row), and one call registers them all
// in one loop pass, which holds up everything else the node does for its
// length. 100,000 registers in well under a second.
const MaxCampaignElections = 100_000

// ErrDuplicateElection refuses a CampaignMany that lists an election twice:
// one stream holds at most one candidacy per election.
var ErrDuplicateElection = errors.New("listed twice")

// ErrNoElections refuses a CampaignMany of no election.
var ErrNoElections = errors.New("node: no elections to campaign in")

// ErrTooManyElections refuses a CampaignMany of more than
// MaxCampaignElections.
var ErrTooManyElections = fmt.Errorf("node: more than %d elections in one campaign", MaxCampaignElections)

// ElectionError names the election of a CampaignMany that was refused: its
// index in the list and its name.
type ElectionError struct {
	Index    int
	Election string
	Err      error
}

func (e *ElectionError) Error() string {
	return fmt.Sprintf("elections[%d] %q: %v", e.Index, e.Election, e.Err)
}

func (e *ElectionError) Unwrap() error { return e.Err }

// CandidacySet is an application's candidacies in many elections, held
// together (one API stream): CampaignMany registers them in one loop pass,
// Close withdraws them in one. It costs its node state, not goroutines or
// buffers per candidacy: each candidacy keeps its newest event, and the
// set a queue of the candidacies whose newest event is not taken yet, in
// the order they changed. A reader that falls behind so loses intermediate
// changes of an election, never its newest state, and the loop never
// waits for it.
type CandidacySet struct {
	n     *Node
	cands []*Candidacy

	mu    sync.Mutex
	queue []*Candidacy // candidacies with an untaken event, in order
	ready chan struct{}
	done  chan struct{}
	once  sync.Once
}

// CampaignMany stands a candidacy in each of opts' elections through this
// node, in one loop pass, until the returned set is closed. The list is
// checked whole before anything stands: an invalid name, value or
// placement, an election listed twice, no election or more than
// MaxCampaignElections is refused, naming the first offender
// (ElectionError, which wraps named.ErrInvalidName, ErrDuplicateElection,
// ...), and nothing stands. Each candidacy behaves as CampaignWith's.
func (n *Node) CampaignMany(ctx context.Context, opts []CampaignOptions) (*CandidacySet, error) {
	switch {
	case len(opts) == 0:
		return nil, ErrNoElections
	case len(opts) > MaxCampaignElections:
		return nil, fmt.Errorf("%w: %d", ErrTooManyElections, len(opts))
	}
	s := &CandidacySet{n: n, cands: make([]*Candidacy, len(opts)), ready: make(chan struct{}, 1), done: make(chan struct{}),
		queue: make([]*Candidacy, 0, len(opts))}
	seen := make(map[string]int, len(opts))
	for i, o := range opts {
		err := named.CheckName(o.Election)
		if err == nil {
			err = named.CheckValue(o.Value)
		}
		if err == nil {
			err = CheckPlacement(o.Placement)
		}
		if err == nil && o.Placement == PlacementSpread {
			err = named.CheckSpreadPriority(o.Priority)
		}
		if j, dup := seen[o.Election]; dup && err == nil {
			err = fmt.Errorf("%w (first at elections[%d])", ErrDuplicateElection, j)
		}
		if err != nil {
			return nil, &ElectionError{Index: i, Election: o.Election, Err: err}
		}
		seen[o.Election] = i
		placement := o.Placement
		if placement == "" {
			placement = PlacementSticky
		}
		s.cands[i] = &Candidacy{Election: o.Election, Value: o.Value, Priority: o.Priority, Placement: placement, n: n, set: s}
	}
	err := n.do(ctx, func() error {
		if n.killed {
			return ErrKilled
		}
		for i, c := range s.cands {
			if err := n.stand(c, len(s.cands)); err != nil {
				s.withdrawStood(i)
				return &ElectionError{Index: i, Election: c.Election, Err: err}
			}
			c.push(CandidacyEvent{Event: EventCandidate, Leader: LeaderInfo{Election: c.Election, State: StateNoLeader}, Candidacy: c.ID})
		}
		return nil
	})
	if err != nil {
		// The pass may still run after ctx ended: Close, queued after it,
		// withdraws whatever it registered.
		var ee *ElectionError
		if !errors.As(err, &ee) && !errors.Is(err, ErrKilled) {
			go s.Close()
		}
		return nil, err
	}
	return s, nil
}

// withdrawStood withdraws the set's first k candidacies (on the loop).
func (s *CandidacySet) withdrawStood(k int) {
	ids := make([]named.ID, 0, k)
	for _, c := range s.cands[:k] {
		if c.ID != 0 {
			ids = append(ids, c.ID)
		}
	}
	s.n.withdrawCandidacies(ids)
}

// push records ev as c's newest event and queues c if its previous event
// was taken (on the loop; never waits for the reader).
func (s *CandidacySet) push(c *Candidacy, ev CandidacyEvent) {
	s.mu.Lock()
	c.last, c.sent = ev, true
	if !c.queued {
		c.queued = true
		s.queue = append(s.queue, c)
	}
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Len is the number of candidacies in the set.
func (s *CandidacySet) Len() int { return len(s.cands) }

// Candidacies are the set's candidacies, in the order CampaignMany was
// given their elections. The slice is the set's: do not change it.
func (s *CandidacySet) Candidacies() []*Candidacy { return s.cands }

// Ready receives a value after events were queued: call Take.
func (s *CandidacySet) Ready() <-chan struct{} { return s.ready }

// Done is closed when Close has withdrawn the set.
func (s *CandidacySet) Done() <-chan struct{} { return s.done }

// Take appends to buf the newest event of every candidacy that changed
// since the last Take, in the order they first changed, at most max of
// them (max <= 0: all), and returns buf. What is left stays queued (Ready
// is signalled again). Each candidacy's first event is an EventCandidate;
// Leader.Election names its election.
func (s *CandidacySet) Take(buf []CandidacyEvent, max int) []CandidacyEvent {
	s.mu.Lock()
	k := len(s.queue)
	if max > 0 && k > max {
		k = max
	}
	for _, c := range s.queue[:k] {
		c.queued = false
		buf = append(buf, c.last)
	}
	rest := copy(s.queue, s.queue[k:])
	clear(s.queue[rest:])
	s.queue = s.queue[:rest]
	s.mu.Unlock()
	if rest > 0 {
		select {
		case s.ready <- struct{}{}:
		default:
		}
	}
	return buf
}

// Close ends every candidacy of the set, in one loop pass: each leadership
// is handed to another node's candidate as Candidacy.Close does. Safe to
// call more than once and from any goroutine.
func (s *CandidacySet) Close() error {
	var err error
	s.once.Do(func() {
		err = s.n.do(context.Background(), func() error {
			s.withdrawStood(len(s.cands))
			return nil
		})
		close(s.done)
	})
	return err
}
