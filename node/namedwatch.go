package node

import (
	"context"
	"sync"

	"github.com/electord/electord/election"
	"github.com/electord/electord/election/named"
)

// ElectionWatch streams a named election's leadership as this node sees
// it: the current one first, then every change. A slow reader loses the
// oldest events, never the newest, and never blocks the node.
type ElectionWatch struct {
	n    *Node
	name string
	ch   chan LeaderInfo
	last LeaderInfo // owned by the loop
	sent bool
	once sync.Once
}

// C delivers the leaderships; it is closed when the watch ends.
func (w *ElectionWatch) C() <-chan LeaderInfo { return w.ch }

// Close ends the watch. Safe to call more than once.
func (w *ElectionWatch) Close() {
	w.once.Do(func() {
		_ = w.n.do(context.Background(), func() error {
			if ws := w.n.named.watchers[w.name]; ws != nil {
				delete(ws, w)
				if len(ws) == 0 {
					delete(w.n.named.watchers, w.name)
				}
			}
			close(w.ch)
			return nil
		})
	})
}

// offer sends li if it differs from the last one sent (loop only).
func (w *ElectionWatch) offer(li LeaderInfo) {
	if w.sent && li == w.last {
		return
	}
	w.last, w.sent = li, true
	pushLatest(w.ch, li)
}

// WatchElection watches a named election, whether or not anyone stands in
// it yet.
func (n *Node) WatchElection(ctx context.Context, name string) (*ElectionWatch, error) {
	if err := named.CheckName(name); err != nil {
		return nil, err
	}
	w := &ElectionWatch{n: n, name: name, ch: make(chan LeaderInfo, candidacyBuffer)}
	err := n.do(ctx, func() error {
		if n.named.watchers == nil {
			n.named.watchers = map[string]map[*ElectionWatch]struct{}{}
		}
		if n.named.watchers[name] == nil {
			n.named.watchers[name] = map[*ElectionWatch]struct{}{}
		}
		n.named.watchers[name][w] = struct{}{}
		info, _ := n.namedInfo(name)
		w.offer(info.Leader)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// ResignElection makes this node's candidacy in name step down if it
// leads: the election runs without it for that round, and its app stays a
// candidate. ErrNotLeader if it does not lead.
func (n *Node) ResignElection(ctx context.Context, name string) error {
	return n.do(ctx, func() error {
		if err := n.refuseCommand(); err != nil {
			return err
		}
		nm := n.named.machines[name]
		if nm == nil {
			return election.ErrNotLeader
		}
		n.catchUpNamed()
		err := nm.sm.Resign()
		n.named.touch(name)
		return err
	})
}
