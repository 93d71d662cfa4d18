package api

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
)

// Limits bound what one client, or all of them, can make the API and the
// sidecar hold: without them every /watch and WatchLeader stream, and every
// connection, costs memory without end. Each field is a config key's value
// (config.Default has the defaults); every one is required, and Validate
// names the one missing.
type Limits struct {
	// MaxWatchers bounds open watches, /watch and WatchLeader together.
	// A watch beyond it is refused: /watch with 503, WatchLeader with
	// ResourceExhausted, each naming the limit.
	MaxWatchers int
	// MaxConns bounds open connections per listener (the API's, the
	// sidecar's); more wait in the kernel's accept queue.
	MaxConns int
	// MaxStreams bounds concurrent gRPC streams per API connection.
	MaxStreams uint32
	// MaxMessageBytes bounds a gRPC request on the API.
	MaxMessageBytes int
	// MaxHeaderListBytes bounds a request's header list (gRPC) or header
	// block (the sidecar's http.Server.MaxHeaderBytes, which the daemon sets).
	MaxHeaderListBytes int
	// HandshakeTimeout closes an API connection that has not finished its
	// HTTP/2 handshake in time (a client that connects and says nothing).
	HandshakeTimeout time.Duration
	// IdleTimeout closes an API connection with no stream for this long.
	IdleTimeout time.Duration
}

// Validate reports every field that is not positive, naming it and the
// config key it comes from.
func (l Limits) Validate() error {
	var errs []error
	for _, f := range []struct {
		field, key string
		v          int64
	}{
		{"MaxWatchers", "max-watchers", int64(l.MaxWatchers)},
		{"MaxConns", "max-conns", int64(l.MaxConns)},
		{"MaxStreams", "max-streams", int64(l.MaxStreams)},
		{"MaxMessageBytes", "max-message-bytes", int64(l.MaxMessageBytes)},
		{"MaxHeaderListBytes", "max-header-list-bytes", int64(l.MaxHeaderListBytes)},
		{"HandshakeTimeout", "handshake-timeout", int64(l.HandshakeTimeout)},
		{"IdleTimeout", "idle-timeout", int64(l.IdleTimeout)},
	} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("api: Limits.%s (%s) must be positive, got %d", f.field, f.key, f.v))
		}
	}
	return errors.Join(errs...)
}

// ErrTooManyWatchers refuses a watch beyond Limits.MaxWatchers.
var ErrTooManyWatchers = errors.New("too many watchers")

// LimitWatchers wraps b so that at most max watches (Subscribe) are open at
// once; one more gets ErrTooManyWatchers. max <= 0 means no limit: b as it is.
func LimitWatchers(b Backend, max int) Backend {
	if max <= 0 {
		return b
	}
	return &watchLimited{Backend: b, max: int64(max)}
}

type watchLimited struct {
	Backend
	max  int64
	open atomic.Int64
}

// Unwrap is the Backend w bounds (for its optional features).
func (w *watchLimited) Unwrap() Backend { return w.Backend }

func (w *watchLimited) Subscribe() (Subscription, error) {
	release, err := w.take()
	if err != nil {
		return nil, err
	}
	s, err := w.Backend.Subscribe()
	if err != nil {
		release()
		return nil, err
	}
	return &countedSub{Subscription: s, done: release}, nil
}

// take takes one of w's slots, or refuses with ErrTooManyWatchers.
func (w *watchLimited) take() (release func(), err error) {
	if w.open.Add(1) > w.max {
		w.open.Add(-1)
		return nil, fmt.Errorf("%w: %d watches are open, the limit (max-watchers); close one or raise it", ErrTooManyWatchers, w.max)
	}
	return func() { w.open.Add(-1) }, nil
}

// streamSlot takes a slot of b's watch limit for a named election's
// stream (a campaign or a watch): they count against max-watchers with
// the default election's watches, so the streams a node holds open stay
// bounded. Without a limit it takes nothing.
func streamSlot(b Backend) (release func(), err error) {
	for {
		if w, ok := b.(*watchLimited); ok {
			return w.take()
		}
		u, ok := b.(interface{ Unwrap() Backend })
		if !ok {
			return func() {}, nil
		}
		b = u.Unwrap()
	}
}

type countedSub struct {
	Subscription
	once sync.Once
	done func()
}

func (s *countedSub) Close() {
	s.once.Do(s.done) // first: whoever sees the watch gone may open one
	s.Subscription.Close()
}

// LimitListener caps l at max open connections (x/net/netutil); max <= 0
// means no cap: l as it is.
func LimitListener(l net.Listener, max int) net.Listener {
	if max <= 0 {
		return l
	}
	return netutil.LimitListener(l, max)
}

// serverOptions are the API server's bounds from l, which Validate
// accepted.
func (l Limits) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(l.MaxStreams),
		grpc.MaxRecvMsgSize(l.MaxMessageBytes),
		grpc.MaxHeaderListSize(uint32(l.MaxHeaderListBytes)),
		grpc.ConnectionTimeout(l.HandshakeTimeout),
	}
}
