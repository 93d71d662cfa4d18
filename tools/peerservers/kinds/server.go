package kinds

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// Server is what every server kind offers; *grpc.Server has the same
// methods.
type Server interface {
	Serve(net.Listener) error
	GracefulStop()
	Stop()
}

// Server kinds Start knows.
const (
	KindGRPC        = "grpc"         // stock grpc.NewServer
	KindGRPCWorkers = "grpc-workers" // stock, with NumStreamWorkers(GOMAXPROCS)
	KindLF          = "lf"           // engine + Leader/Followers pool
	KindPerConn     = "perconn"      // engine + a goroutine per connection
	KindHSHA        = "hsha"         // engine + Half-Sync/Half-Async
)

// Kinds lists every server kind, stock ones first.
var Kinds = []string{KindGRPC, KindGRPCWorkers, KindLF, KindPerConn, KindHSHA}

// ErrNotBuilt is returned by Start for a kind whose package does not exist
// (yet).
var ErrNotBuilt = errors.New("lftest: server kind not built yet")

// Options tune the server Start builds. Zero values take each kind's
// defaults.
type Options struct {
	// MaxRecvMsgBytes is the largest request message the server accepts
	// (grpc.MaxRecvMsgSize, engine.Limits.MaxRecvMsgBytes).
	MaxRecvMsgBytes int
	// Workers is the number of workers: grpc.NumStreamWorkers for
	// grpc-workers (0 means GOMAXPROCS), the pool size for lf and hsha (0
	// means the driver's default). Other kinds ignore it.
	Workers int
	// KeepaliveEnforcement is the stock server's keepalive policy (nil: the
	// grpc-go default, which allows one ping per 5 minutes and none without
	// a stream). The engine kinds answer every PING and ignore it.
	KeepaliveEnforcement *keepalive.EnforcementPolicy
	// ServeDone, if set, is called with Serve's result when it returns.
	ServeDone func(error)
	// TLS, if not nil, serves TLS with it: grpc.Creds(credentials.NewTLS)
	// for the stock kinds, lf.Config.TLS for lf. The other kinds (perconn,
	// hsha, the lf variants) have no TLS and Start refuses them.
	TLS *tls.Config
}

// ErrNoTLS is returned by Start for a kind that cannot serve TLS.
var ErrNoTLS = errors.New("lftest: this server kind has no TLS")

// engineKinds builds the engine driver kinds; see drivers.go.
var engineKinds = map[string]func(register func(grpc.ServiceRegistrar), opts Options) (Server, error){}

// Start listens on 127.0.0.1:0, builds a server of the given kind, calls
// register on it (or on its engine.Registry), and runs Serve on a new
// goroutine. The caller stops the server.
//
// The stock kinds get a unary interceptor that turns a handler panic into
// codes.Internal, as the engine does; grpc-go alone would crash the process.
func Start(kind string, register func(grpc.ServiceRegistrar), opts Options) (addr string, srv Server, err error) {
	switch kind {
	case KindGRPC, KindGRPCWorkers:
		so := []grpc.ServerOption{grpc.ChainUnaryInterceptor(recoverUnary)}
		if opts.MaxRecvMsgBytes > 0 {
			so = append(so, grpc.MaxRecvMsgSize(opts.MaxRecvMsgBytes))
		}
		if opts.KeepaliveEnforcement != nil {
			so = append(so, grpc.KeepaliveEnforcementPolicy(*opts.KeepaliveEnforcement))
		}
		if opts.TLS != nil {
			so = append(so, grpc.Creds(credentials.NewTLS(opts.TLS)))
		}
		if kind == KindGRPCWorkers {
			w := opts.Workers
			if w <= 0 {
				w = runtime.GOMAXPROCS(0)
			}
			so = append(so, grpc.NumStreamWorkers(uint32(w)))
		}
		gs := grpc.NewServer(so...)
		register(gs)
		srv = gs
	default:
		if opts.TLS != nil && kind != KindLF {
			return "", nil, fmt.Errorf("%w: %s", ErrNoTLS, kind)
		}
		build, ok := engineKinds[kind]
		if !ok {
			for _, k := range Kinds {
				if k == kind {
					return "", nil, fmt.Errorf("%w: %s", ErrNotBuilt, kind)
				}
			}
			return "", nil, fmt.Errorf("lftest: unknown server kind %q", kind)
		}
		if srv, err = build(register, opts); err != nil {
			return "", nil, fmt.Errorf("lftest: %s: %w", kind, err)
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Stop()
		return "", nil, err
	}
	go func() {
		err := srv.Serve(lis)
		if opts.ServeDone != nil {
			opts.ServeDone(err)
		}
	}()
	return lis.Addr().String(), srv, nil
}

// recoverUnary turns a handler panic into codes.Internal.
func recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, status.Errorf(codes.Internal, "panic in %s: %v", info.FullMethod, p)
		}
	}()
	return h(ctx, req)
}
