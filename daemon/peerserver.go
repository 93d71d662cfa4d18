package daemon

import (
	"errors"
	"log/slog"
	"net"

	"github.com/electord/electord/config"
	pb "github.com/electord/electord/proto/electord/v1"
	"github.com/electord/electord/transport"
	"github.com/electord/electord/transport/lf"
	"github.com/electord/electord/transport/lf/engine"
)

// peerServer is what serves the Peer service: a *grpc.Server or the
// Leader/Followers pool (*lf.Server), which share this API.
type peerServer interface {
	Serve(net.Listener) error
	GracefulStop()
	Stop()
}

// newPeerServer builds the server cfg.PeerServer names around svc, with the
// same message size limit either way. Where the lf pool cannot run (not
// Linux) it falls back to grpc and logs so.
func newPeerServer(cfg config.Config, svc *transport.PeerService, log *slog.Logger) peerServer {
	if cfg.PeerServer == "lf" {
		reg := engine.NewRegistry()
		pb.RegisterPeerServer(reg, svc)
		s, err := lf.New(reg, lf.Config{Workers: cfg.PeerWorkers,
			Limits: engine.Limits{MaxRecvMsgBytes: transport.DefaultMaxMessageBytes}})
		if err == nil {
			return s
		}
		if !errors.Is(err, lf.ErrUnsupported) {
			log.Error("peer-server lf failed to start; falling back to grpc", "err", err)
		} else {
			log.Warn("peer-server lf is not supported on this system; falling back to grpc", "err", err)
		}
	}
	return transport.NewGRPCServer(svc)
}
