// Package daemon wires one electord node from its configuration: the peer
// gRPC server and transport, gossip, the instance loop, the client gRPC API
// and the sidecar HTTP endpoint. cmd/electord, devcluster (a local cluster)
// and the tests use it.
package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/electord/electord/api"
	"github.com/electord/electord/config"
	"github.com/electord/electord/election"
	"github.com/electord/electord/internal/msglimit"
	"github.com/electord/electord/membership"
	"github.com/electord/electord/node"
	"github.com/electord/electord/security"
	"github.com/electord/electord/security/handshake"
	"github.com/electord/electord/transport"
	"github.com/electord/electord/transport/peerauth"
)

// Daemon is one running node.
type Daemon struct {
	Config config.Config
	Node   *node.Node
	// The addresses actually bound (a :0 port resolved).
	PeerAddr, GossipAddr, APIAddr, HTTPAddr string
	// HealthAddr is the bound health/metrics/status address ("" when
	// health-addr is off); see ops.go.
	HealthAddr string

	// Security is the node's TLS material (nil: plaintext); APISecurity
	// the API's authorization (nil: none), with its refusal count.
	Security    *security.Material
	APISecurity *api.Security
	// PeerTLS is what the peer port's TLS is built from (nil: plaintext).
	PeerTLS *PeerTLS

	log     *slog.Logger
	tr      *transport.GRPC
	peerSrv peerServer
	apiSrv  *grpc.Server
	httpSrv *http.Server
	opsSrv  *http.Server
	probes  probeShare // health probes of the loop, coalesced (health.go)
	ops     opsState   // metrics.go
	cancel  context.CancelFunc
	// probeDone is closed when the candidate probe's goroutine ended
	// (candidateprobe.go).
	probeDone chan struct{}
	runErr    chan error
	stop      sync.Once
}

// Options are what a caller may add to a config.
type Options struct {
	Logger *slog.Logger
	// Exit is what `electctl kill --exit` calls (electord: end the
	// process); nil stops the daemon (Stop), for good.
	Exit func()
	// Peers, if set, sits between the node and its peers in both
	// directions. For tests: see daemontest.Faults.
	Peers PeerHook
	// Collectors are added to the /metrics registry on health-addr (for
	// example cmd/electord's leader-slice writer).
	Collectors []prometheus.Collector
}

// PeerHook sits between a node and its peers. Tests inject faults with it
// (package daemontest); a daemon without one sends and receives directly.
type PeerHook interface {
	// Receiver wraps the node's receiver. Every message from a peer goes
	// through what it returns: the requests the peer server serves and the
	// heartbeat replies the transport gets back, and so do send failures.
	Receiver(node transport.Receiver) transport.Receiver
	// Transport wraps the transport the node sends through. A send it
	// refuses is reported to node, the receiver Receiver was given.
	Transport(tr transport.Transport, node transport.Receiver) transport.Transport
}

// PeerTLS is the peer port's TLS material, for the peer-TLS change
// (transport/peerauth, daemon/peerserver.go).
type PeerTLS struct {
	// Cluster is the cluster name every peer certificate must carry.
	Cluster string
	// Server is the base of the peer server's config:
	// peerauth.ServerConfig(Server, Cluster).
	Server *tls.Config
	// Client is the transport's base client config: transport.GRPCConfig
	// TLS (with Cluster), which dials peerauth.ClientConfig(Client,
	// Cluster, id).
	Client *tls.Config
	// Pool, if set, is the CA pool of the moment: both sides of the peer
	// port verify chains against it at every handshake (nil: the pools in
	// Server and Client, fixed).
	Pool func() *x509.CertPool
	// Refused counts and logs the handshakes the peer server refuses
	// (nil: none; Start sets it).
	Refused *handshake.Recorder
	// Served records the handshakes the peer server (Server, marked)
	// served, so that a proof of an id can tell a relay back to this node.
	Served *peerauth.Served
}

// peerTLSHook turns the peer port's TLS on. The peer-TLS change sets it
// (from an init func in daemon/peerserver.go); while it is nil the peer port
// stays plaintext even with TLS material, and Start logs so. Start calls
// it, when the node has TLS material, before the transport is built: it
// may set tc's TLS fields, and returns the peer server to serve svc with
// (nil: newPeerServer's).
var peerTLSHook func(p PeerTLS, cfg config.Config, tc *transport.GRPCConfig, svc *transport.PeerService, log *slog.Logger) peerServer

// Start validates cfg, binds every port, and starts the node. An invalid
// config fails before any port is bound.
func Start(cfg config.Config, opts Options) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Daemon{Config: cfg, log: log, runErr: make(chan error, 1)}
	d.ops.extra = opts.Collectors
	if opts.Exit == nil {
		opts.Exit = func() { go d.Stop() } // kill --exit ends this daemon for good
	}
	// The data dir next: one this process cannot write, or a term file that
	// cannot be trusted, refuses the start before any port is bound.
	store, err := node.OpenTermStore(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if _, err := store.Load(); err != nil {
		return nil, err
	}
	if err := d.loadSecurity(); err != nil {
		return nil, err
	}
	label := cfg.GossipLabelFor(d.cluster())
	var lis []net.Listener
	closeAll := func() {
		for _, l := range lis {
			l.Close()
		}
	}
	listen := func(key, addr string) (net.Listener, error) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			closeAll()
			d.closeSecurity()
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		lis = append(lis, l)
		return l, nil
	}
	peerLis, err := listen("peer-addr", cfg.PeerAddr)
	if err != nil {
		return nil, err
	}
	apiLis, err := listen("api-addr", cfg.APIAddr)
	if err != nil {
		return nil, err
	}
	httpLis, err := listen("http-addr", cfg.HTTPAddr)
	if err != nil {
		return nil, err
	}
	var opsLis net.Listener
	if cfg.HealthAddr != "" {
		if opsLis, err = listen("health-addr", cfg.HealthAddr); err != nil {
			return nil, err
		}
		d.HealthAddr = opsLis.Addr().String()
	}
	d.PeerAddr, d.APIAddr, d.HTTPAddr = advertise(cfg, peerLis.Addr()), advertise(cfg, apiLis.Addr()), httpLis.Addr().String()

	self := node.Meta{ID: election.NodeID(cfg.ID), Name: cfg.Name, Priority: cfg.Priority,
		PeerAddr: d.PeerAddr, APIAddr: d.APIAddr, HTTPAddr: d.HTTPAddr}

	// Gossip binds its port on first start; a revived node keeps that port.
	gossipBind := cfg.GossipAddr
	newMembership := func() (*membership.Membership, error) {
		m, err := membership.New(membership.Config{Self: membership.Meta(self), BindAddr: gossipBind,
			AdvertiseAddr: advertiseHost(cfg), Join: cfg.Join, Preset: cfg.GossipPreset, Logger: log,
			KeyFile: cfg.GossipKeyFile, Label: label, Prove: d.proveFunc(), BootstrapExpect: cfg.BootstrapExpect,
			Settings: membership.Settings{Algorithm: cfg.Algorithm, Quorum: cfg.Quorum, Preempt: cfg.Preempt}})
		if err != nil {
			return nil, err
		}
		gossipBind, d.GossipAddr = m.BoundAddr(), m.LocalAddr()
		d.ops.gossip.Store(m)
		return m, nil
	}

	// Bind gossip now, so the address is known when Start returns (dev
	// clusters and callers join it); the node's first Run uses this one.
	first, err := newMembership()
	if err != nil {
		closeAll()
		d.closeSecurity()
		return nil, err
	}
	// The node joins (its seeds, then every member it knows) only when its
	// loop takes the membership, as it starts serving peers: a member in
	// every view counts toward bootstrap-expect and is sent Elections, so
	// it must be able to answer them; one that joined before its loop ran
	// would stay silent for as long as a loaded host takes to start it, and
	// the nodes below it would win elections it should have won.
	fresh := func() (node.Membership, error) {
		m := first
		if m != nil {
			first = nil
		} else {
			var err error
			if m, err = newMembership(); err != nil {
				return nil, err
			}
		}
		m.RetryJoin()
		return adaptGossip(m), nil
	}

	// Every message from a peer (served requests, heartbeat replies)
	// reaches the node's inbox through recv, and so does every send failure.
	inbox := node.NewInbox(0)
	var recv transport.Receiver = inbox
	if opts.Peers != nil {
		recv = opts.Peers.Receiver(inbox)
	}
	tc := transport.GRPCConfig{Self: self.ID, Receiver: recv, MaxMessageBytes: cfg.MaxMessageBytes}
	svc := transport.NewPeerService(self.ID, recv)
	svc.SetLogger(log)
	d.initOps(svc)
	if d.PeerTLS != nil {
		if peerTLSHook != nil {
			p := *d.PeerTLS
			p.Refused = d.ops.handshakes.Listener(handshake.Peer)
			d.peerSrv = peerTLSHook(p, cfg, &tc, svc, log)
		} else {
			log.Warn("the peer port is plaintext: this build has no peer-port TLS yet; the API and gossip are secured")
		}
	}
	tr, err := transport.NewGRPC(tc)
	if err != nil {
		first.Shutdown()
		closeAll()
		d.closeSecurity()
		return nil, err
	}
	var send transport.Transport = tr
	if opts.Peers != nil {
		send = opts.Peers.Transport(tr, inbox)
	}
	nd, err := node.New(node.Config{Self: self, Algorithm: cfg.Algorithm, Tick: cfg.Tick,
		HeartbeatInterval: cfg.HeartbeatInterval, HeartbeatTimeout: cfg.HeartbeatTimeout,
		Quorum: cfg.Quorum, Preempt: cfg.Preempt, BootstrapExpect: cfg.BootstrapExpect, CandidateProbe: cfg.CandidateProbe,
		Spread: node.SpreadConfig{Imbalance: cfg.SpreadImbalance, Interval: cfg.SpreadRebalanceInterval, Batch: cfg.SpreadRebalanceBatch},
		Store:  store, NewMembership: fresh,
		Transport: send, Inbox: inbox, Exit: opts.Exit, Logger: log})
	if err != nil {
		tr.Close()
		first.Shutdown()
		closeAll()
		d.closeSecurity()
		return nil, err
	}
	d.Node, d.tr = nd, tr

	if d.peerSrv == nil {
		d.peerSrv = newPeerServer(cfg, svc, log)
	}
	// One watch budget for the API and the sidecar together; connections
	// are capped per listener.
	limits := api.Limits{MaxWatchers: cfg.MaxWatchers, MaxConns: cfg.MaxConns, MaxStreams: uint32(cfg.MaxStreams),
		HandshakeTimeout: cfg.HandshakeTimeout, IdleTimeout: cfg.IdleTimeout,
		MaxMessageBytes: cfg.MaxMessageBytes, MaxHeaderListBytes: cfg.MaxHeaderListBytes}
	b := api.LimitWatchers(backend{nd}, limits.MaxWatchers)
	if d.Security != nil {
		d.APISecurity = &api.Security{ServerTLS: d.Security.ServerConfig(), Forward: d.Security.ForwardCredentials,
			Cluster: d.cluster(), Logger: log, Refused: d.ops.handshakes.Listener(handshake.API)}
	}
	// grpc-go answers an API request over max-message-bytes with its own
	// text, written before any code of ours runs, which does not name the
	// key: the log does, for the operator.
	apiOpts := append(d.apiOptions(), grpc.StatsHandler(msglimit.LogRefusals(log, "api port")))
	if d.apiSrv, err = api.NewSecureGRPCServer(b, limits, d.APISecurity, apiOpts...); err != nil {
		// Validate checked every limit; this is a field Start forgot.
		tr.Close()
		first.Shutdown()
		closeAll()
		d.closeSecurity()
		return nil, err
	}
	d.registerGRPCHealth(d.apiSrv)
	d.httpSrv = api.NewHTTPServer(b, limits.MaxHeaderListBytes)
	// The sidecar serves a connection per /watch: room for every allowed
	// watch on top of max-conns, so a watch flood cannot keep /leader and
	// /healthz (the kubelet's probes) from being answered.
	apiLis, httpLis = api.LimitListener(apiLis, limits.MaxConns), api.LimitListener(httpLis, limits.MaxConns+limits.MaxWatchers)
	peerLis, apiLis, httpLis = d.countServers(peerLis, apiLis, httpLis)
	if cfg.HTTPTLS {
		httpLis = handshake.NewListener(httpLis, d.Security.SidecarConfig(), cfg.HandshakeTimeout,
			d.ops.handshakes.Listener(handshake.HTTP))
	}

	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go func() { d.runErr <- nd.Run(ctx) }()
	d.startCandidateProbe(ctx)
	go d.peerSrv.Serve(peerLis)
	go d.apiSrv.Serve(apiLis)
	go d.httpSrv.Serve(httpLis)
	if opsLis != nil {
		d.opsSrv = &http.Server{Handler: d.opsMux(), ReadHeaderTimeout: 10 * time.Second}
		go d.opsSrv.Serve(opsLis)
	}
	log.Info("electord started", "id", cfg.ID, "algorithm", cfg.Algorithm, "peer", d.PeerAddr, "api", d.APIAddr,
		"http", d.HTTPAddr, "join", cfg.Join, "tls", d.Security != nil, "gossip-encrypted", cfg.GossipKeyFile != "",
		"cluster", d.cluster(), "gossip-label", label)
	if exposed := cfg.Exposed(); len(exposed) > 0 && (d.Security == nil || cfg.GossipKeyFile == "") {
		log.Warn("INSECURE: started with --insecure on addresses other machines can reach: anyone who reaches them can "+
			"read the cluster, kill or revive nodes, move leadership and join gossip. See docs/SECURITY.md.",
			"exposed", exposed, "tls", d.Security != nil, "gossip-encrypted", cfg.GossipKeyFile != "")
	}
	return d, nil
}

// Stop hands leadership over (a leader transfers to its best-ranked live
// member and waits, at most two heartbeat timeouts, to see it lead; from
// then on it never claims leadership), then leaves gossip and stops every
// server; it waits for the loop. A follower leaves at once.
func (d *Daemon) Stop() error {
	var err error
	d.stop.Do(func() {
		wait := 2 * d.Config.HeartbeatTimeout
		hctx, hcancel := context.WithTimeout(context.Background(), wait+time.Second)
		if to, herr := d.Node.Handover(hctx, wait); herr != nil {
			d.log.Warn("stopping: handover", "to", uint64(to), "err", herr)
		} else if to != 0 {
			d.log.Info("stopping: handed leadership over", "to", uint64(to))
		}
		hcancel()
		d.cancel()
		if d.probeDone != nil {
			<-d.probeDone
		}
		select {
		case err = <-d.runErr:
		case <-time.After(5 * time.Second):
			err = errors.New("daemon: the instance loop did not stop within 5s")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		d.httpSrv.Shutdown(ctx)
		if d.opsSrv != nil {
			d.opsSrv.Shutdown(ctx)
		}
		stopGRPC(d.apiSrv)
		stopGRPC(d.peerSrv)
		d.tr.Close()
		d.closeSecurity()
	})
	return err
}

// Done is closed when the node's loop ended.
func (d *Daemon) Done() <-chan struct{} { return d.Node.Done() }

func stopGRPC(s peerServer) {
	done := make(chan struct{})
	go func() { s.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		s.Stop()
	}
}

// ConfigError is a configuration Start refused after reading the files it
// names (TLS material, the gossip key file), before binding any port:
// cmd/electord exits with 2 as for an invalid config.
type ConfigError struct{ Err error }

func (e ConfigError) Error() string { return e.Err.Error() }
func (e ConfigError) Unwrap() error { return e.Err }

// loadSecurity reads the gossip key file and the node's TLS material, if
// configured: the certificate must name this node's id (and cluster, if
// set).
func (d *Daemon) loadSecurity() error {
	cfg := d.Config
	if cfg.GossipKeyFile != "" {
		if _, err := membership.ReadKeyFile(cfg.GossipKeyFile); err != nil {
			return ConfigError{err}
		}
	}
	if !cfg.TLS() {
		return nil
	}
	m, err := security.Load(security.Files{CA: cfg.TLSCA, Cert: cfg.TLSCert, Key: cfg.TLSKey},
		security.Options{Cluster: cfg.Cluster, Role: security.RoleNode, NodeID: cfg.ID, Logger: d.log})
	if err != nil {
		return ConfigError{err}
	}
	d.Security = m
	// Served: a proof of an id (daemon/identity.go) that reaches this
	// node's own peer port, through a relay, is told apart.
	served := &peerauth.Served{}
	d.PeerTLS = &PeerTLS{Cluster: m.Cluster(), Server: served.Mark(m.PeerServerTLS()), Client: m.PeerClientTLS(), Pool: m.Pool,
		Served: served}
	return nil
}

func (d *Daemon) closeSecurity() {
	if d.Security != nil {
		d.Security.Close()
	}
}

// cluster is the cluster name: the config's, else the certificate's.
func (d *Daemon) cluster() string {
	if d.Config.Cluster != "" || d.Security == nil {
		return d.Config.Cluster
	}
	return d.Security.Cluster()
}

// advertise is the address peers should dial for a bound listener.
func advertise(cfg config.Config, a net.Addr) string {
	tcp := a.(*net.TCPAddr)
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		host = advertiseHost(cfg)
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}

func advertiseHost(cfg config.Config) string {
	if cfg.AdvertiseHost != "" {
		return cfg.AdvertiseHost
	}
	if host, _, err := net.SplitHostPort(cfg.PeerAddr); err == nil && host != "" && host != "0.0.0.0" && host != "::" {
		return host
	}
	// Bound to every interface and no advertise-host: the first non-loopback IPv4.
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	return "127.0.0.1"
}

// backend adapts *node.Node to api.Backend, with named elections.
type backend struct{ *node.Node }

var _ api.ElectionBackend = backend{}

func (b backend) Subscribe() (api.Subscription, error) { return b.Node.Subscribe(), nil }
