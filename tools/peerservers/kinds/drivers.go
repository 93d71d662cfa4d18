package kinds

import (
	"google.golang.org/grpc"

	"github.com/electord/electord/tools/peerservers/perconn"
	"github.com/electord/electord/transport/lf/engine"
)

func init() {
	engineKinds[KindPerConn] = func(register func(grpc.ServiceRegistrar), opts Options) (Server, error) {
		reg := engine.NewRegistry()
		register(reg)
		return perconn.New(reg, opts.limits()), nil
	}
}

// limits are the engine.Limits of opts.
func (o Options) limits() engine.Limits {
	return engine.Limits{MaxRecvMsgBytes: o.MaxRecvMsgBytes}
}
