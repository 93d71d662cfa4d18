package kinds

import (
	"errors"

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
		s, err := lf.New(reg, lf.Config{Workers: opts.Workers, Limits: opts.limits(), TLS: opts.TLS})
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}
