// Package engine is a small gRPC-over-HTTP/2 server engine for unary calls,
// built on golang.org/x/net/http2's Framer and hpack. It does no I/O of its
// own: a driver (the Leader/Followers pool in transport/lf, a goroutine per
// connection, or a Half-Sync/Half-Async reactor) reads bytes from a socket
// and hands them to a Session, runs the calls the Session assembles, and
// writes the Session's output back to the socket. A Session is not safe for
// concurrent use: whoever holds the connection holds its Session. Call.Run is
// the one exception; it touches only the call and may run elsewhere.
//
// It speaks exactly the subset of HTTP/2 and gRPC that grpc-go clients need
// (see docs/LF.md for the list and for what happens beyond each limit).
package engine

import (
	"errors"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc"
)

// The flow-control windows the engine advertises unless Limits set others.
// They are no configuration key: they size the engine's buffers, which
// ConnBufferBytes and Shared bound.
const (
	// DefaultStreamWindow is the SETTINGS_INITIAL_WINDOW_SIZE advertised:
	// what a client may send on a new stream before the engine grants more.
	// 64 KiB holds any election message whole.
	DefaultStreamWindow = 64 << 10
	// DefaultConnWindow is the connection receive window granted at the
	// start (credit is returned as DATA is read), 4 MiB so that a client's
	// streams are bounded by their own windows, not by this one.
	DefaultConnWindow = 4 << 20
)

// Limits bound what one connection may ask of the server. MaxRecvMsgBytes,
// MaxConcurrentStreams and MaxHeaderListBytes are configuration (the
// max-message-bytes, peer-max-streams and max-header-list-bytes keys) and
// required: see Validate. The windows' zero values take the constants
// above, and ConnBufferBytes' is derived from the others.
//
// Memory: what one connection can make the engine buffer is bounded by
// ConnBufferBytes, and, with Shared set, what all the connections that
// share it buffer by Shared's size. A client that sends more than the
// windows the engine advertised gets FLOW_CONTROL_ERROR (RST_STREAM for a
// stream window, GOAWAY for the connection window).
type Limits struct {
	// MaxRecvMsgBytes is the largest request message; a larger one ends its
	// call with ResourceExhausted (the connection stays up).
	MaxRecvMsgBytes int
	// MaxConcurrentStreams is advertised in SETTINGS; a stream beyond it is
	// refused with RST_STREAM(REFUSED_STREAM), which grpc-go retries.
	MaxConcurrentStreams uint32
	// MaxHeaderListBytes is advertised in SETTINGS; a larger header block
	// ends its call with ResourceExhausted.
	MaxHeaderListBytes uint32
	// StreamWindow is the initial stream window advertised in SETTINGS. A
	// stream whose message (its 5-byte prefix says how long) needs more
	// gets one WINDOW_UPDATE for the rest, when ConnBufferBytes and Shared
	// have room for it. At least 5; values under 65,535 hold only once the
	// client has acknowledged the SETTINGS.
	StreamWindow uint32
	// ConnWindow is the connection receive window granted at the start;
	// credit is returned as DATA arrives (the buffers are bounded by the
	// stream windows, not by this).
	ConnWindow uint32
	// ConnBufferBytes bounds the request bytes one connection may have
	// buffered or promised (open stream windows included). 0 means
	// MaxConcurrentStreams × StreamWindow + MaxRecvMsgBytes + 5, the least
	// that lets every stream use its initial window while one message of
	// the largest size completes. A stream whose message cannot get the
	// window it needs waits for other streams to end; if none can free
	// enough, it ends with ResourceExhausted.
	ConnBufferBytes int
	// Shared, if not nil, bounds the request bytes buffered by every
	// Session that shares it (a server's connections). A stream that would
	// go beyond it ends with ResourceExhausted and its data is dropped.
	Shared *Budget
}

// Validate reports every configured limit that is not positive, naming the
// field and its config key. A Session given Limits that fail it refuses
// what the zero limit allows: nothing.
func (lim Limits) Validate() error {
	var errs []error
	for _, f := range []struct {
		field, key string
		v          int64
	}{
		{"MaxRecvMsgBytes", "max-message-bytes", int64(lim.MaxRecvMsgBytes)},
		{"MaxConcurrentStreams", "peer-max-streams", int64(lim.MaxConcurrentStreams)},
		{"MaxHeaderListBytes", "max-header-list-bytes", int64(lim.MaxHeaderListBytes)},
	} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("engine: Limits.%s (%s) must be positive, got %d", f.field, f.key, f.v))
		}
	}
	return errors.Join(errs...)
}

// sized returns lim with its windows within what HTTP/2 allows (a zero
// window: the constant above) and ConnBufferBytes derived when zero.
func (lim Limits) sized() Limits {
	if lim.StreamWindow == 0 {
		lim.StreamWindow = DefaultStreamWindow
	}
	lim.StreamWindow = min(max(lim.StreamWindow, 5), maxWindow)
	if lim.ConnWindow == 0 {
		lim.ConnWindow = DefaultConnWindow
	}
	lim.ConnWindow = min(max(lim.ConnWindow, initialPeerWindow), maxWindow)
	if lim.ConnBufferBytes <= 0 {
		lim.ConnBufferBytes = int(lim.MaxConcurrentStreams)*int(lim.StreamWindow) + lim.MaxRecvMsgBytes + 5
	}
	return lim
}

// Budget bounds the request bytes buffered by all the Sessions that share
// it (Limits.Shared). It is safe for concurrent use.
type Budget struct {
	max  int64
	used atomic.Int64
}

// NewBudget returns a Budget of max bytes.
func NewBudget(max int64) *Budget { return &Budget{max: max} }

// Used returns the bytes taken now.
func (b *Budget) Used() int64 { return b.used.Load() }

// take reserves n bytes, or reports false (and reserves nothing) when that
// would go beyond the maximum. A nil Budget always has room.
func (b *Budget) take(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}

// give returns n bytes taken earlier.
func (b *Budget) give(n int64) {
	if b != nil && n > 0 {
		b.used.Add(-n)
	}
}

// Errors Feed returns when the connection must close. The output already
// holds a GOAWAY that says why, where the peer got far enough to read one.
var (
	ErrBadPreface = errors.New("engine: bad client preface")
	ErrProtocol   = errors.New("engine: HTTP/2 protocol error")
	ErrGoAway     = errors.New("engine: peer sent GOAWAY and has no open streams")
)

// Registry maps full method names ("/pkg.Service/Method") to unary
// handlers. It implements grpc.ServiceRegistrar, so generated Register
// functions work on it: pb.RegisterPeerServer(reg, svc). Register every
// service before serving; lookups are then safe for concurrent use.
type Registry struct {
	methods  map[string]methodEntry
	services map[string]bool
}

type methodEntry struct {
	impl any
	h    grpc.MethodHandler
}

var _ grpc.ServiceRegistrar = (*Registry)(nil)

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	return &Registry{methods: map[string]methodEntry{}, services: map[string]bool{}}
}

// RegisterService implements grpc.ServiceRegistrar. Streaming methods are
// not supported and are left unregistered (calls to them get Unimplemented).
func (r *Registry) RegisterService(sd *grpc.ServiceDesc, impl any) {
	r.services[sd.ServiceName] = true
	for _, m := range sd.Methods {
		r.methods["/"+sd.ServiceName+"/"+m.MethodName] = methodEntry{impl: impl, h: m.Handler}
	}
}
