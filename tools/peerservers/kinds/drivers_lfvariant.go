//go:build lfvariant

package kinds

import (
	"google.golang.org/grpc"

	"github.com/electord/electord/transport/lf"
	"github.com/electord/electord/transport/lf/engine"
)

// The variant kinds, built with lf.NewVariant (the lfvariant tag).
func init() {
	kind := func(v lf.Variant) func(register func(grpc.ServiceRegistrar), opts Options) (Server, error) {
		return func(register func(grpc.ServiceRegistrar), opts Options) (Server, error) {
			reg := engine.NewRegistry()
			register(reg)
			cfg := poolConfig(opts)
			cfg.TLS = nil // the variants serve plain HTTP/2
			s, err := lf.NewVariant(reg, cfg, v)
			if err != nil {
				return nil, err
			}
			return s, nil
		}
	}
	engineKinds["lf-locked"] = kind(lf.Variant{LockOSThread: true})
	engineKinds["lf-blocking"] = kind(lf.Variant{BlockingWait: true})
	engineKinds["lf-fifo"] = kind(lf.Variant{FIFO: true})
	engineKinds["lf-batch16"] = kind(lf.Variant{EventsPerWait: 16})
}

// variantsBuilt says whether the variant kinds are compiled in.
const variantsBuilt = true
