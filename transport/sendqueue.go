package transport

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/internal/fifo"
)

// link is one peer's connection as seen by its send queue.
type link interface {
	// setAddr records the peer's new address (SetPeer on a known peer).
	// Called under the queues' lock: it must not block or call back.
	setAddr(addr string)
	// send carries m to the peer and reports the outcome to the Receiver.
	// The peer's goroutine calls it for one message at a time, in order;
	// ctx is canceled when the peer is removed or the transport closed. It
	// returns true when the peer was silent: the message's own deadline
	// passed without an answer (see sendQueues.silent).
	send(ctx context.Context, m election.Message) (silent bool)
	// close releases the link; the peer's goroutine calls it as it ends.
	close()
}

// sendQueues is the per-peer send queue of both transports (GRPC and
// Memory): setPeer gives a peer a bounded queue and one goroutine, started
// by its first message, that hands its messages, in order, to the peer's
// link. The failures it finds itself are reported to the Receiver from one
// of its goroutines, never from inside a method and never under its lock:
// ErrUnknownPeer for a peer without an address or a message still queued
// when its peer was removed, ErrQueueFull for a full queue. After close,
// messages are dropped without a report. All methods are safe for
// concurrent use.
type sendQueues struct {
	recv     Receiver
	queueLen int
	newLink  func(id election.NodeID, addr string) link
	// lost, if set, counts every message that failed here or was dropped.
	lost func(election.Message)

	ctx  context.Context // canceled by close
	stop context.CancelFunc

	mu     sync.RWMutex
	peers  map[election.NodeID]*peerQueue
	closed bool
	wg     sync.WaitGroup // peer goroutines and failure reports
}

type peerQueue struct {
	id election.NodeID
	// queue holds up to queueLen messages, its memory following its
	// length: at 128 processes a channel of 256 per peer was 4.4 MB a node.
	queue *fifo.Queue[election.Message]
	// named holds the named elections' messages and Candidacies (see
	// namedSet): they leave in batches, and a slow peer never fails them.
	named *namedSet
	busy  busyState // owned by the peer's goroutine (busy.go)
	link  link
	ctx   context.Context // canceled by removePeer or close
	stop  context.CancelFunc
	// start runs once: the peer's goroutine at its first message (most
	// members of a large cluster are never sent to: a follower sends to
	// its leader), or closing the link of a peer removed before it.
	start sync.Once
}

func newSendQueues(recv Receiver, queueLen int, newLink func(election.NodeID, string) link, lost func(election.Message)) *sendQueues {
	ctx, stop := context.WithCancel(context.Background())
	return &sendQueues{recv: recv, queueLen: queueLen, newLink: newLink, lost: lost, ctx: ctx, stop: stop,
		peers: make(map[election.NodeID]*peerQueue)}
}

// isClosed reports whether close was called.
func (q *sendQueues) isClosed() bool { return q.ctx.Err() != nil }

func (q *sendQueues) count(m election.Message) {
	if q.lost != nil {
		q.lost(m)
	}
}

// send queues m for m.To and returns at once.
func (q *sendQueues) send(m election.Message) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		q.count(m)
		return
	}
	p := q.peers[m.To]
	if p == nil {
		q.failAsync(m, fmt.Errorf("%w %d", ErrUnknownPeer, m.To))
		return
	}
	if forNamedSet(m) {
		if !p.named.push(m) {
			q.count(m) // lost on the way, not the peer's failure (namedSet)
		}
	} else if !p.queue.Push(m) {
		q.failAsync(m, fmt.Errorf("%w (peer %d)", ErrQueueFull, m.To))
		return
	}
	// Under q.mu with q.closed false, so wg.Add never races with close's Wait.
	p.start.Do(func() {
		q.wg.Add(1)
		go q.run(p)
	})
}

// report hands the receiver a failure from a new goroutine, unless q is
// closed (a peer's drop reported as a failed message, Network.Crash).
func (q *sendQueues) report(m election.Message, err error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return
	}
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		q.recv.Failed(m, err)
	}()
}

// failAsync reports a failure from a new goroutine. q.mu must be held (read
// or write) and q.closed false, so that wg.Add never races with close's Wait.
func (q *sendQueues) failAsync(m election.Message, err error) {
	q.count(m)
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		q.recv.Failed(m, err)
	}()
}

// setPeer records id's address: a new peer gets its link and queue (its
// goroutine starts with its first message); a known one its new address.
// Ignored after close.
func (q *sendQueues) setPeer(id election.NodeID, addr string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if p := q.peers[id]; p != nil {
		p.link.setAddr(addr)
		return
	}
	ctx, stop := context.WithCancel(q.ctx)
	p := &peerQueue{id: id, queue: fifo.New[election.Message](q.queueLen), named: newNamedSet(DefaultNamedQueueLen), link: q.newLink(id, addr), ctx: ctx, stop: stop}
	q.peers[id] = p
}

// end stops p: its goroutine, if it started, closes the link and reports
// what is still queued; if it never started, nothing was queued and the
// link (dialed by a Connect, perhaps) is closed here.
func (p *peerQueue) end() {
	p.stop()
	p.start.Do(p.link.close)
}

// linkOf returns id's link, nil for an unknown peer or after close.
func (q *sendQueues) linkOf(id election.NodeID) link {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if p := q.peers[id]; p != nil && !q.closed {
		return p.link
	}
	return nil
}

// removePeer forgets id: a message in flight sees its context canceled, and
// those still queued are reported with ErrUnknownPeer.
func (q *sendQueues) removePeer(id election.NodeID) {
	q.mu.Lock()
	p := q.peers[id]
	delete(q.peers, id)
	q.mu.Unlock()
	if p != nil {
		p.end()
	}
}

// close stops every peer goroutine and waits for them and for the failure
// reports under way. Safe to call more than once.
func (q *sendQueues) close() {
	q.mu.Lock()
	q.closed = true
	peers := q.peers
	q.peers = make(map[election.NodeID]*peerQueue)
	q.mu.Unlock()
	q.stop()
	for _, p := range peers {
		p.end()
	}
	q.wg.Wait()
}

// run is the goroutine of one peer: it sends the queued messages in order.
func (q *sendQueues) run(p *peerQueue) {
	defer q.wg.Done()
	defer func() {
		p.link.close()
		for _, m := range p.named.take() {
			q.removed(p, m)
		}
		for {
			m, ok := p.queue.Pop()
			if !ok {
				return
			}
			q.removed(p, m)
		}
	}()
	var pause <-chan time.Time
	named := p.named.ready
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.queue.Ready():
			m, ok := p.queue.Pop()
			if !ok {
				continue
			}
			if p.ctx.Err() != nil {
				q.removed(p, m)
				return
			}
			if q.sendNext(p, m) {
				q.silent(p)
			}
		case <-pause:
			pause, named = nil, p.named.ready
			if !q.takeNamed(p) {
				return
			}
		case <-named:
			if d := time.Until(p.busy.until); d > 0 {
				// The peer is overloaded: its named messages wait for its
				// inbox to drain, the default election's go on.
				pause, named = time.After(d), nil
				continue
			}
			if !q.takeNamed(p) {
				return
			}
		}
	}
}

// takeNamed sends every named message waiting for p, and reports false
// when p's context ended (what was taken is removed).
func (q *sendQueues) takeNamed(p *peerQueue) bool {
	ms := p.named.take()
	if p.ctx.Err() != nil {
		for _, m := range ms {
			q.removed(p, m)
		}
		return false
	}
	// A silent named call fails nothing else: what waits in the set goes
	// in the next call (one send timeout later at most).
	p.busy.refused = 0
	q.sendNamed(p, ms)
	p.named.recycle(ms)
	if p.busy.refused == 0 {
		p.busy = busyState{} // the peer took everything: not busy
	}
	return true
}

// sendNamed sends ms, every named message that waited for p, in calls of
// at most maxCall messages: the rest in the order queued, then the
// Heartbeats in the order queued. To a peer that takes Heartbeats in a
// Batch, the call where the rest ends carries the first Heartbeats too:
// at rest a node pair's period is its pair beat and the quiet followers'
// heartbeats due with it, one call, not a Batch and a Heartbeats call. The
// Heartbeats go last because a call that carries one waits for the peer's
// loop to answer it: a mass failover's Coordinators and Candidacies are
// not held behind thousands of answers. After a call that found no answer
// in time, what had not left is lost on the way, not reported: the next
// pass's messages get their own call.
func (q *sendQueues) sendNamed(p *peerQueue, ms []election.Message) {
	hbs, rest := splitHeartbeats(ms)
	if len(hbs) > 0 && len(rest) > 0 {
		// ms is this pass's to reorder: the rest, then the Heartbeats.
		copy(ms, rest)
		copy(ms[len(rest):], hbs)
	}
	n := len(rest)
	bl, batches := p.link.(batchLink)
	for i := 0; i < len(ms); {
		end := min(i+maxCall, len(ms))
		if i < n && end > n && !(batches && bl.batchesHeartbeats()) {
			end = n // the Heartbeats get calls of their own
		}
		if q.sendMany(p, ms[i:end]) {
			for _, m := range ms[end:] {
				q.count(m)
			}
			return
		}
		i = end
	}
}

// splitHeartbeats splits ms into its coalescable Heartbeats and the rest,
// each in the order queued. A round of one kind only (most are: a mass
// failover's Coordinators and Candidacies, a beat's Heartbeats) is ms
// itself; a mixed one gets two slices of their exact sizes. Appending each
// message to a slice grown as it went was a fifth of what a mass failover
// allocated.
func splitHeartbeats(ms []election.Message) (hbs, rest []election.Message) {
	n := 0
	for _, m := range ms {
		if coalescable(m) {
			n++
		}
	}
	switch n {
	case 0:
		return nil, ms
	case len(ms):
		return ms, nil
	}
	hbs, rest = make([]election.Message, 0, n), make([]election.Message, 0, len(ms)-n)
	for _, m := range ms {
		if coalescable(m) {
			hbs = append(hbs, m)
		} else {
			rest = append(rest, m)
		}
	}
	return hbs, rest
}

// sendMany sends ms in one call if p's link can (a Batch; Heartbeats
// alone in a Heartbeats call to a peer that does not take them in a
// Batch), else one call each. It returns true when the peer was silent
// (the messages not sent then are the caller's).
func (q *sendQueues) sendMany(p *peerQueue, ms []election.Message) bool {
	bl, batches := p.link.(batchLink)
	if coalescable(ms[0]) && (!batches || !bl.batchesHeartbeats()) {
		// Heartbeats only (sendNamed puts them last, and cuts the call
		// before them for such a peer).
		if hl, ok := p.link.(heartbeatsLink); ok && len(ms) > 1 {
			return hl.sendHeartbeats(p.ctx, ms)
		}
		batches = false
	}
	// A lone named message goes in a Batch too: a peer's refusal as
	// overloaded then comes back per message and is sent again after a
	// pause (sendQueues.busy), as for many; in its own call it was
	// reported failed, so what a busy peer refused depended on how many
	// messages happened to wait together. (A lone Heartbeat goes in one
	// to a peer that takes them there, for one call shape per peer; its
	// refusal is reported failed, as its own call's was.)
	if batches && (len(ms) > 1 || retriesBusy(ms[0])) {
		return bl.sendBatch(p.ctx, ms)
	}
	for i, m := range ms {
		if p.link.send(p.ctx, m) {
			for _, m := range ms[i+1:] {
				q.count(m)
			}
			return true
		}
	}
	return false
}

// sendNext sends m, the oldest message of the default election queued for
// p, in its own call (every node of every version reads them so). It
// returns true when the peer was silent.
func (q *sendQueues) sendNext(p *peerQueue, m election.Message) bool {
	return p.link.send(p.ctx, m)
}

// silent reports every message queued for p at once, with ErrPeerSilent:
// the message before them waited its whole deadline for a peer that did
// not answer (paused, host down, cut off), and each of them would wait as
// long again, one after the other. Without this, a silent leader kept a
// follower's Election or Coordinator behind the heartbeats queued before
// it suspected (each one send timeout) until gossip declared the leader
// dead. A message queued after this gets its own attempt.
func (q *sendQueues) silent(p *peerQueue) {
	for {
		m, ok := p.queue.Pop()
		if !ok {
			return
		}
		q.count(m)
		q.recv.Failed(m, fmt.Errorf("%w (peer %d)", ErrPeerSilent, p.id))
	}
}

// removed reports m, still queued when its peer went: with ErrUnknownPeer
// after removePeer, silently after close.
func (q *sendQueues) removed(p *peerQueue, m election.Message) {
	q.count(m)
	if !q.isClosed() {
		q.recv.Failed(m, fmt.Errorf("%w %d (removed)", ErrUnknownPeer, p.id))
	}
}
