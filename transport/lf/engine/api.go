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

	"google.golang.org/grpc"
)

// Defaults for Limits.
const (
	DefaultMaxRecvMsgBytes      = 4 << 20
	DefaultMaxConcurrentStreams = 1000
	DefaultMaxHeaderListBytes   = 16 << 10
)

// Limits bound what one connection may ask of the server. Zero fields take
// the defaults above.
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
