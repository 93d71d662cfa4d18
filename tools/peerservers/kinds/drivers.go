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

// limits are the engine.Limits of opts. The engine has no defaults of its
// own: the benchmarks' drivers run with a 4 MiB message (grpc-go's server
// default, as the grpc kinds), 100 streams a connection and a 16 KiB
// header list.
func (o Options) limits() engine.Limits {
	lim := engine.Limits{MaxRecvMsgBytes: 4 << 20, MaxConcurrentStreams: 100, MaxHeaderListBytes: 16 << 10}
	if o.MaxRecvMsgBytes > 0 {
		lim.MaxRecvMsgBytes = o.MaxRecvMsgBytes
	}
	return lim
}
