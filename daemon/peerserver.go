package daemon

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/electord/electord/config"
	pb "github.com/electord/electord/proto/electord/v1"
	"github.com/electord/electord/security/handshake"
	"github.com/electord/electord/transport"
	"github.com/electord/electord/transport/lf"
	"github.com/electord/electord/transport/lf/engine"
	"github.com/electord/electord/transport/peerauth"
)

// peerServer is what serves the Peer service: a *grpc.Server or the
// Leader/Followers pool (*lf.Server), which share this API.
type peerServer interface {
	Serve(net.Listener) error
	GracefulStop()
	Stop()
}

// newPeerServer builds the plaintext peer server (see buildPeerServer).
func newPeerServer(cfg config.Config, svc *transport.PeerService, log *slog.Logger) peerServer {
	return buildPeerServer(peerServerInputs{Config: cfg, Service: svc, Log: log})
}

// peerServerInputs is what buildPeerServer builds from.
type peerServerInputs struct {
	Config  config.Config
	Service *transport.PeerService
	Log     *slog.Logger
	// PeerTLS, if not nil, is the complete server configuration of the peer
	// port (peerauth.ServerConfig): either server serves mutual TLS with it.
	// nil: plaintext.
	PeerTLS *tls.Config
	// Refused counts and logs the handshakes PeerTLS refuses (nil: none).
	Refused *handshake.Recorder
}

func init() { peerTLSHook = peerServerTLS }

// peerServerTLS is Start's peerTLSHook: it turns mutual TLS on for both
// directions of the peer port. The transport dials each peer with
// peerauth.ClientConfig(p.Client, p.Cluster, id) (the answering node must
// be the member meant), the service binds every message's From to the
// caller's certificate (PermissionDenied otherwise), and the server, grpc
// or lf as cfg.PeerServer says, requires a verified node certificate of
// p.Cluster. Without a cluster or a server base it leaves the port
// plaintext and says so.
func peerServerTLS(p PeerTLS, cfg config.Config, tc *transport.GRPCConfig, svc *transport.PeerService, log *slog.Logger) peerServer {
	if p.Cluster == "" || p.Server == nil || p.Client == nil {
		log.Error("the peer port is plaintext: its TLS material is incomplete", "cluster", p.Cluster,
			"server", p.Server != nil, "client", p.Client != nil)
		return nil
	}
	tc.TLS, tc.Cluster, tc.TLSPool = p.Client, p.Cluster, p.Pool
	svc.BindIdentity(p.Cluster)
	return buildPeerServer(peerServerInputs{Config: cfg, Service: svc, Log: log,
		PeerTLS: peerauth.ServerConfigPool(p.Server, p.Cluster, p.Pool), Refused: p.Refused})
}

// buildPeerServer builds the server in.Config.PeerServer names around
// in.Service, with the same message size and header list limits either way
// (max-message-bytes, max-header-list-bytes)
// and peer-max-buffered-bytes bounding what all connections buffer
// together (lf counts the bytes, grpc the streams in flight: see
// PeerService.BufferBudget), serving TLS with in.PeerTLS when set. Where the lf pool cannot run (not Linux) it falls
// back to grpc and logs so.
func buildPeerServer(in peerServerInputs) peerServer {
	cfg, svc, log := in.Config, in.Service, in.Log
	if cfg.PeerServer == "lf" {
		var refused func(net.Addr, error)
		if in.PeerTLS != nil {
			refused = in.Refused.Refused
		}
		reg := engine.NewRegistry()
		pb.RegisterPeerServer(reg, svc)
		s, err := lf.New(reg, lf.Config{Workers: cfg.PeerWorkerCount(),
			MaxConns: cfg.MaxConns, HandshakeTimeout: cfg.HandshakeTimeout, IdleTimeout: cfg.IdleTimeout,
			MaxBufferedBytes: cfg.PeerMaxBufferedBytes, TLS: in.PeerTLS, TLSRefused: refused,
			Limits: engine.Limits{MaxRecvMsgBytes: cfg.MaxMessageBytes, MaxHeaderListBytes: uint32(cfg.MaxHeaderListBytes),
				MaxConcurrentStreams: uint32(cfg.PeerMaxStreams)}})
		if err == nil {
			return s
		}
		if !errors.Is(err, lf.ErrUnsupported) {
			log.Error("peer-server lf failed to start; falling back to grpc", "err", err)
		} else {
			log.Warn("peer-server lf is not supported on this system; falling back to grpc", "err", err)
		}
	}
	opts := []grpc.ServerOption{
		grpc.MaxConcurrentStreams(uint32(cfg.PeerMaxStreams)),
		grpc.ConnectionTimeout(cfg.HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: cfg.IdleTimeout}),
		// The lf engine's limit; grpc-go's own is 16 MiB.
		grpc.MaxHeaderListSize(uint32(cfg.MaxHeaderListBytes)),
		svc.BufferBudget(cfg.PeerMaxBufferedBytes, cfg.MaxMessageBytes, cfg.PeerStreamTimeout),
	}
	if in.PeerTLS != nil {
		opts = append(opts, grpc.Creds(handshake.Credentials(credentials.NewTLS(in.PeerTLS), in.Refused)))
	}
	return limitedGRPC{transport.NewGRPCServer(svc, cfg.MaxMessageBytes, opts...), cfg.MaxConns}
}

// limitedGRPC serves a grpc.Server on a listener capped at max connections
// (the lf pool caps its own).
type limitedGRPC struct {
	*grpc.Server
	max int
}

func (s limitedGRPC) Serve(l net.Listener) error {
	return s.Server.Serve(netutil.LimitListener(l, s.max))
}
