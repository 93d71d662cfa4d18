package handshake

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// LogEvery is the least time between two log lines of one listener and
// reason. A flood of bad handshakes (a misconfigured node retrying, a
// scanner) logs at most one line per listener and reason per LogEvery,
// and each line says how many refusals of its kind were not logged since
// the one before; the metric counts every refusal. Ten seconds keeps a
// flood to a few lines a minute while a single knock is logged at once.
const LogEvery = 10 * time.Second

// The listeners, as the metric's listener label names them.
const (
	Peer = "peer" // the peer port (either peer server)
	API  = "api"  // the client API (gRPC)
	HTTP = "http" // the sidecar HTTP endpoint, with http-tls
)

// Refusals are a node's refused-handshake counters and their log.
type Refusals struct {
	log *slog.Logger
	now func() time.Time

	mu  sync.Mutex
	lis []*Recorder
}

// New returns the counters, empty; log gets the refusals (nil discards).
func New(log *slog.Logger) *Refusals {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Refusals{log: log, now: time.Now}
}

// Listener returns the recorder of the listener name (Peer, API, HTTP),
// made on the first call: the metric lists every reason of it from then
// on, zero or not. One per name, so no series is exported twice.
func (r *Refusals) Listener(name string) *Recorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.lis {
		if rec.name == name {
			return rec
		}
	}
	rec := &Recorder{name: name, parent: r}
	r.lis = append(r.lis, rec)
	return rec
}

// Count is one listener's refusals of one reason.
type Count struct {
	Listener string
	Reason   Reason
	N        uint64
}

// Counts are every recorder's counts, every reason included.
func (r *Refusals) Counts() []Count {
	r.mu.Lock()
	lis := append([]*Recorder(nil), r.lis...)
	r.mu.Unlock()
	var out []Count
	for _, rec := range lis {
		for _, reason := range Reasons() {
			out = append(out, Count{Listener: rec.name, Reason: reason, N: rec.Count(reason)})
		}
	}
	return out
}

// Recorder counts and logs one listener's refused handshakes. A nil
// *Recorder records nothing.
type Recorder struct {
	name   string
	parent *Refusals
	counts [numReasons]atomic.Uint64

	mu   sync.Mutex
	logs [numReasons]logState
}

// logState is when a reason was last logged, and how many of it were not
// logged since.
type logState struct {
	last       time.Time
	suppressed uint64
}

// Count is how many handshakes of reason this listener refused.
func (r *Recorder) Count(reason Reason) uint64 {
	if r == nil || reason >= numReasons {
		return 0
	}
	return r.counts[reason].Load()
}

// Refused records the failed handshake of a connection from remote: err is
// what the handshake returned. An error of a connection this server closed
// itself (net.ErrClosed: it is stopping) is no refusal and is not counted.
func (r *Recorder) Refused(remote net.Addr, err error) {
	if r == nil || err == nil || errors.Is(err, net.ErrClosed) {
		return
	}
	reason := Classify(err)
	r.counts[reason].Add(1)
	now := r.parent.now()
	r.mu.Lock()
	st := &r.logs[reason]
	if !st.last.IsZero() && now.Sub(st.last) < LogEvery {
		st.suppressed++
		r.mu.Unlock()
		return
	}
	suppressed := st.suppressed
	st.last, st.suppressed = now, 0
	r.mu.Unlock()
	addr := "unknown"
	if remote != nil {
		addr = remote.String()
	}
	r.parent.log.Log(context.Background(), logLevel(reason), "tls: handshake refused", "listener", r.name,
		"remote", addr, "reason", reason.String(), "err", err.Error(), "suppressed", suppressed)
}

// logLevel is WARN for every reason but Closed, which is DEBUG: a bare TCP
// connect and close says nothing about a certificate, and electord's own
// peer transport makes one to a peer whose connection dropped (an idle
// one, say) to tell a dead process from a live one (transport/peerdown.go),
// so a healthy cluster's peer ports see some.
func logLevel(r Reason) slog.Level {
	if r == Closed {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}
