package kinds

import (
	"google.golang.org/grpc"

	"github.com/electord/electord/config"
	"github.com/electord/electord/internal/lfvariant"
	"github.com/electord/electord/transport/lf"
	"github.com/electord/electord/transport/lf/engine"
)

// VariantKinds are the lf pool with one comparison setting changed (see
// internal/lfvariant), for measuring that setting: LockOSThread,
// BlockingWait, FIFO promotion, 16 events per wait.
var VariantKinds = []string{"lf-locked", "lf-blocking", "lf-fifo", "lf-batch16"}

func init() {
	lfKind := func(v lfvariant.Variant) func(register func(grpc.ServiceRegistrar), opts Options) (Server, error) {
		return func(register func(grpc.ServiceRegistrar), opts Options) (Server, error) {
			reg := engine.NewRegistry()
			register(reg)
			if v == (lfvariant.Variant{}) {
				// The pool as the product builds it, with a node's settings
				// (config.Default) but for the pool size (0: a node's)
				// and the limits.
				d := config.Default()
				workers := opts.Workers
				if workers == 0 {
					workers = d.PeerWorkerCount()
				}
				s, err := lf.New(reg, lf.Config{Workers: workers, Limits: opts.limits(), TLS: opts.TLS, MaxConns: d.MaxConns,
					HandshakeTimeout: d.HandshakeTimeout, IdleTimeout: d.IdleTimeout, MaxBufferedBytes: d.PeerMaxBufferedBytes})
				if err != nil {
					return nil, err
				}
				return s, nil
			}
			return lfvariant.New(reg, opts.Workers, opts.limits(), v)
		}
	}
	engineKinds[KindLF] = lfKind(lfvariant.Variant{})
	engineKinds["lf-locked"] = lfKind(lfvariant.Variant{LockOSThread: true})
	engineKinds["lf-blocking"] = lfKind(lfvariant.Variant{BlockingWait: true})
	engineKinds["lf-fifo"] = lfKind(lfvariant.Variant{FIFO: true})
	engineKinds["lf-batch16"] = lfKind(lfvariant.Variant{EventsPerWait: 16})
}
