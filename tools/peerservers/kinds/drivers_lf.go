package kinds

import (
	"errors"
	"runtime"
	"time"

	"google.golang.org/grpc"

	"github.com/electord/electord/transport/lf"
	"github.com/electord/electord/transport/lf/engine"
)

// VariantKinds are the lf pool with one comparison setting changed (see
// lf.Variant), for measuring that setting: LockOSThread, BlockingWait, FIFO
// promotion, 16 events per wait. They are built only with the lfvariant
// build tag (drivers_lfvariant.go); without it Start reports ErrNoVariants
// for them.
var VariantKinds = []string{"lf-locked", "lf-blocking", "lf-fifo", "lf-batch16"}

// ErrNoVariants is returned by Start for a VariantKinds kind in a build
// without the lfvariant tag.
var ErrNoVariants = errors.New("the pool's comparison variants are compiled in only with -tags lfvariant (go build -tags lfvariant, go test -tags lfvariant)")

func init() {
	// The pool as the product builds it.
	engineKinds[KindLF] = func(register func(grpc.ServiceRegistrar), opts Options) (Server, error) {
		reg := engine.NewRegistry()
		register(reg)
		s, err := lf.New(reg, poolConfig(opts))
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

// The pool's settings in the benchmark. They are a node's values
// (config.Default; TestPoolConfigIsANodes keeps them so), written out here
// because the benchmark's server process must not link the config package
// (viper, memberlist): what it would allocate at start moves the garbage
// collector's targets, and with them the memory per idle connection that
// peerbench measures. The connection limit is the benchmark's own: the idle
// and heartbeat shapes open 1,000 connections each, just under a node's
// 1,024, so the servers it measures accept up to 4,096 and the limit never
// shapes a result.
const (
	maxConns         = 4096
	handshakeTimeout = 10 * time.Second
	idleTimeout      = 5 * time.Minute
	maxBufferedBytes = 32 << 20
)

// workersPerCPU is a node's pool size per GOMAXPROCS (config's peer-workers 0).
const workersPerCPU = 2

// poolConfig is the lf pool's Config for opts: a node's settings but for
// the pool size (opts.Workers; 0: a node's), the limits, TLS and the
// connection limit, which the benchmark chooses.
func poolConfig(opts Options) lf.Config {
	workers := opts.Workers
	if workers == 0 {
		workers = workersPerCPU * runtime.GOMAXPROCS(0)
	}
	return lf.Config{Workers: workers, Limits: opts.limits(), TLS: opts.TLS, MaxConns: maxConns,
		HandshakeTimeout: handshakeTimeout, IdleTimeout: idleTimeout, MaxBufferedBytes: maxBufferedBytes}
}
