package kinds

import (
	"google.golang.org/grpc"

	"github.com/electord/electord/tools/peerservers/hsha"
	"github.com/electord/electord/transport/lf/engine"
)

// hsha is Linux only (raw epoll); elsewhere Start reports ErrNotBuilt for it.
func init() {
	engineKinds[KindHSHA] = func(register func(grpc.ServiceRegistrar), opts Options) (Server, error) {
		reg := engine.NewRegistry()
		register(reg)
		return hsha.New(reg, hsha.Config{Workers: opts.Workers, Limits: opts.limits()}), nil
	}
}
