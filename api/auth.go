package api

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	grpcstatus "google.golang.org/grpc/status"

	electordv1 "github.com/electord/electord/proto/electord/v1"
	"github.com/electord/electord/security"
	"github.com/electord/electord/security/handshake"
)

// ForwardedForKey is the gRPC metadata key a forwarding node sets to the
// identity (URI) of the caller whose command it forwards, for the log of
// the node that acts on it.
const ForwardedForKey = "electord-forwarded-for"

// Security is the API's TLS and authorization. A nil *Security
// serves plaintext and lets every caller do everything.
//
// The rules, checked by an interceptor on every call before the service
// sees it:
//
//   - Every call needs a verified client certificate of the cluster (the
//     TLS handshake refuses a connection without one).
//   - GetLeader, WatchLeader, Status, Members, ListElections, Campaign and
//     Proclaim: any identity (client, admin or node). A Proclaim of a
//     candidacy another identity opened needs the admin role: the service
//     records who opened each campaign stream (proclaimown.go).
//   - Kill, Revive, Resign and Transfer, of the default election or a
//     named one: the admin role (the API cannot tell which app a named
//     leadership belongs to; an app gives its own up by closing its stream,
//     or through its sidecar on loopback). A node identity is accepted too, but only on a forwarded call (ForwardedKey set): a
//     node forwards a command only from inside its own handler, which the
//     interceptor reached only for an admin, and a forwarded call is never
//     forwarded again. A node calling on its own account is refused.
//
// A refusal is PermissionDenied naming the role that is missing, logged
// and counted (Denied).
type Security struct {
	// ServerTLS serves the API (security.Material.ServerConfig).
	ServerTLS *tls.Config
	// Forward dials node id, a command being forwarded to it, presenting
	// this node's certificate; the node answering must be id, by its
	// certificate (security.Material.ForwardCredentials: the id is checked
	// rather than the address, which may be a pod IP no certificate names).
	Forward func(id uint64) credentials.TransportCredentials
	// Cluster is the cluster every identity must belong to.
	Cluster string
	// Logger gets refusals and forwarded commands; nil discards.
	Logger *slog.Logger
	// Refused counts and logs the TLS handshakes the API refuses (nil:
	// none).
	Refused *handshake.Recorder

	denied atomic.Uint64
}

// Denied is how many calls were refused for their identity or role.
func (s *Security) Denied() uint64 { return s.denied.Load() }

// commands need the admin role; every other method any identity.
var commands = map[string]bool{"Kill": true, "Revive": true, "Resign": true, "Transfer": true}

func (s *Security) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// authorize checks the caller of fullMethod (/pkg.Service/Method).
func (s *Security) authorize(ctx context.Context, fullMethod string) error {
	method := fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]
	id, err := callerIdentity(ctx)
	if err != nil {
		return s.deny(codes.Unauthenticated, method, "", err.Error())
	}
	if s.Cluster != "" && id.Cluster != s.Cluster {
		return s.deny(codes.PermissionDenied, method, id.String(), "the certificate belongs to cluster "+id.Cluster+", not "+s.Cluster)
	}
	if !commands[method] {
		return nil
	}
	switch {
	case id.Role == security.RoleAdmin:
		return nil
	case id.Role == security.RoleNode && forwarded(ctx):
		md, _ := metadata.FromIncomingContext(ctx)
		s.logger().Info("api: forwarded command", "method", method, "from", id.String(), "for", strings.Join(md.Get(ForwardedForKey), ","))
		return nil
	case id.Role == security.RoleNode:
		return s.deny(codes.PermissionDenied, method, id.String(), "the admin role is required (a node identity may only forward an admin's command)")
	}
	return s.deny(codes.PermissionDenied, method, id.String(), "the admin role is required (spiffe://"+id.Cluster+"/admin/<name>), the caller is a "+string(id.Role))
}

func (s *Security) deny(c codes.Code, method, who, why string) error {
	s.denied.Add(1)
	s.logger().Warn("api: call refused", "method", method, "caller", who, "reason", why)
	return grpcstatus.Errorf(c, "%s: %s", method, why)
}

// callerIdentity is the identity of the verified client certificate of
// the call's connection.
func callerIdentity(ctx context.Context) (security.Identity, error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return security.Identity{}, errors.New("a TLS client certificate is required (this API serves TLS only)")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.PeerCertificates) == 0 {
		return security.Identity{}, errors.New("a verified TLS client certificate is required")
	}
	return security.FromCertificate(info.State.PeerCertificates[0])
}

// serverOptions are the credentials and interceptors of a secured API.
func (s *Security) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.Creds(handshake.Credentials(credentials.NewTLS(s.ServerTLS), s.Refused)),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := s.authorize(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := s.authorize(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

// forwardCredentials are what forward dials node id with.
func (s *Security) forwardCredentials(id uint64) credentials.TransportCredentials {
	return s.Forward(id)
}

// NewSecureGRPCServer is NewLimitedGRPCServer with TLS and the
// authorization of sec (nil: plaintext, as NewLimitedGRPCServer).
func NewSecureGRPCServer(b Backend, l Limits, sec *Security, opts ...grpc.ServerOption) (*grpc.Server, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return newGRPCServer(b, l.serverOptions(), l.IdleTimeout, sec, opts), nil
}

// newGRPCServer is the API server with bounds (nil: grpc-go's own), a
// connection without streams closed after idle (0: never), the keep-alive
// pings long WatchLeader streams need, TLS and authorization of sec (nil:
// plaintext), and opts.
func newGRPCServer(b Backend, bounds []grpc.ServerOption, idle time.Duration, sec *Security, opts []grpc.ServerOption) *grpc.Server {
	all := append(bounds,
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: serverPingTime, Timeout: serverPingTimeout, MaxConnectionIdle: idle}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: serverMinClientPing, PermitWithoutStream: true}),
	)
	svc := &service{b: b}
	if sec != nil {
		all = append(all, sec.serverOptions()...)
		svc.sec = sec
	}
	s := grpc.NewServer(append(all, opts...)...)
	electordv1.RegisterElectorServer(s, svc)
	return s
}
