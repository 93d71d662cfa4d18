package named

import (
	"errors"
	"iter"
	"maps"
	"slices"
)

// ID names one local candidacy for as long as the node runs. Never zero.
type ID uint64

// Candidacy is one application standing in one election through this node.
type Candidacy struct {
	ID       ID
	Election string
	Value    string
	Priority int64
}

// ErrUnknownCandidacy: no live candidacy has that ID.
var ErrUnknownCandidacy = errors.New("no such candidacy")

// Queues holds the local candidacies, one first-come queue per election,
// as Curator's LeaderLatch queues participants. The node stands in an
// election for the head of its queue; the others wait behind it. The zero
// value is ready to use.
type Queues struct {
	next   ID
	queues map[string][]Candidacy
	where  map[ID]string // the election of each live candidacy
}

// Add queues a new candidacy at the tail of its election's queue and says
// whether it is the head (the queue was empty). The name and value are
// checked (CheckName, CheckValue).
func (q *Queues) Add(election, value string, priority int64) (Candidacy, bool, error) {
	if err := CheckName(election); err != nil {
		return Candidacy{}, false, err
	}
	if err := CheckValue(value); err != nil {
		return Candidacy{}, false, err
	}
	if q.queues == nil {
		q.queues, q.where = map[string][]Candidacy{}, map[ID]string{}
	}
	q.next++
	c := Candidacy{ID: q.next, Election: election, Value: value, Priority: priority}
	q.queues[election] = append(q.queues[election], c)
	q.where[c.ID] = election
	return c, len(q.queues[election]) == 1, nil
}

// Remove ends a candidacy. It reports the candidacy, whether it was its
// queue's head (the node's standing in that election changes), and the
// new head, if any is left.
func (q *Queues) Remove(id ID) (gone Candidacy, wasHead bool, next Candidacy, ok bool, err error) {
	name, live := q.where[id]
	if !live {
		return Candidacy{}, false, Candidacy{}, false, ErrUnknownCandidacy
	}
	delete(q.where, id)
	queue := q.queues[name]
	i := slices.IndexFunc(queue, func(c Candidacy) bool { return c.ID == id })
	gone, wasHead = queue[i], i == 0
	queue = slices.Delete(queue, i, i+1)
	if len(queue) == 0 {
		delete(q.queues, name)
		return gone, wasHead, Candidacy{}, false, nil
	}
	q.queues[name] = queue
	return gone, wasHead, queue[0], true, nil
}

// SetValue changes a candidacy's value (proclaim) and says whether it is
// its queue's head, whose value the election shows.
func (q *Queues) SetValue(id ID, value string) (head bool, err error) {
	if err := CheckValue(value); err != nil {
		return false, err
	}
	name, live := q.where[id]
	if !live {
		return false, ErrUnknownCandidacy
	}
	queue := q.queues[name]
	i := slices.IndexFunc(queue, func(c Candidacy) bool { return c.ID == id })
	queue[i].Value = value
	return i == 0, nil
}

// Head is the candidacy the node stands for in election.
func (q *Queues) Head(election string) (Candidacy, bool) {
	if queue := q.queues[election]; len(queue) > 0 {
		return queue[0], true
	}
	return Candidacy{}, false
}

// Queue is election's queue, head first. The caller must not change it.
func (q *Queues) Queue(election string) []Candidacy { return q.queues[election] }

// Position is a live candidacy's place in its queue (0: the head).
func (q *Queues) Position(id ID) (int, bool) {
	name, live := q.where[id]
	if !live {
		return 0, false
	}
	return slices.IndexFunc(q.queues[name], func(c Candidacy) bool { return c.ID == id }), true
}

// Elections lists the elections with a local candidacy, sorted.
func (q *Queues) Elections() []string { return slices.Sorted(maps.Keys(q.queues)) }

// Heads yields every election with a local candidacy and the head of its
// queue, in no order: for a walk whose result does not depend on it, which
// sorting thousands of names would only slow.
func (q *Queues) Heads() iter.Seq2[string, Candidacy] {
	return func(yield func(string, Candidacy) bool) {
		for name, queue := range q.queues {
			if len(queue) > 0 && !yield(name, queue[0]) {
				return
			}
		}
	}
}

// Len is the number of live candidacies.
func (q *Queues) Len() int { return len(q.where) }
