package node

import (
	"errors"
	"time"

	"github.com/electord/electord/election"
)

// ErrNoStore: the node cannot persist its term and takes no part in
// elections until it can (Status.Fault says why).
var ErrNoStore = errors.New("node: cannot persist the term; not taking part until the disk takes writes again")

// Retry bounds for a failed term save.
const (
	saveRetryMin = 50 * time.Millisecond
	saveRetryMax = 5 * time.Second
)

// storeFailed handles a save the term store refused (a full or read-only
// disk, a volume the process cannot write). Nothing of the batch was sent.
// The node stops answering peers (their sends fail, so they elect without
// it), reports no leader and a fault (Health, /healthz 503), and retries the
// save with back-off. The frozen state machine may hold a leadership or an
// attempt at a term the disk never took: it is thrown away when the save
// succeeds, and a new one starts from the disk, above every term the old
// one used, so no two leaderships ever share a term.
func (n *Node) storeFailed(err error, want Persisted) {
	n.counters.PersistErrors.Add(1)
	n.pending.Term = max(n.pending.Term, want.Term)
	n.pending.LeaderTerm = max(n.pending.LeaderTerm, want.LeaderTerm)
	if n.storeErr == nil {
		n.log.Error("cannot persist the term: not leading nor campaigning until the disk takes writes again",
			"term", n.pending.Term.String(), "fencing_token", uint64(n.pending.Term), "err", err)
		n.retryDelay = saveRetryMin
	} else {
		n.retryDelay = min(2*n.retryDelay, saveRetryMax)
	}
	n.storeErr, n.dirty = err, true
	n.in.serving.Store(false)
	n.leading.Store(false)
	n.leaseUntil.Store(0)
	n.announce() // watchers hear now that it claims nothing, as Leader answers
	n.in.drain()
	n.retryC = time.After(n.retryDelay)
}

// retrySave tries the failed save again; on success the node takes part
// again with a new state machine started from the disk.
func (n *Node) retrySave() {
	n.retryC = nil
	if n.storeErr == nil {
		return
	}
	// The frozen machine's highest term covers every term it may have
	// used, persisted or not.
	st := n.sm.Status()
	want := Persisted{Term: max(n.pending.Term, st.Term), LeaderTerm: n.pending.LeaderTerm}
	if err := n.saveTerm(want.Term, want.LeaderTerm); err != nil {
		n.storeFailed(err, want)
		return
	}
	if err := n.startMachine(); err != nil {
		n.storeFailed(err, want)
		return
	}
	t := n.cfg.Store.Durable().Term
	n.log.Info("the term is persisted again: taking part in elections", "term", t.String(), "fencing_token", uint64(t))
	n.storeErr, n.pending, n.dirty = nil, Persisted{}, true
	for id, rec := range n.members {
		if rec.alive {
			n.sm.Observe(election.Event{Type: election.EventJoin, Member: election.Member{ID: id, Priority: rec.Priority}})
		}
	}
	if !n.killed {
		n.in.serving.Store(true)
	}
	n.resumeNamedClock()
}

// Health is nil while the node can take part in elections, else why not.
func (n *Node) Health() error {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.status.Fault != "" {
		return errors.New(n.status.Fault)
	}
	return nil
}
