// Package daemon wires one electord node from its configuration: the peer
// gRPC server and transport, gossip, the instance loop, the client gRPC API
// and the sidecar HTTP endpoint. cmd/electord and the tests use it.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/electord/electord/api"
	"github.com/electord/electord/config"
	"github.com/electord/electord/election"
	"github.com/electord/electord/membership"
	"github.com/electord/electord/node"
	"github.com/electord/electord/transport"
)

// Daemon is one running node.
type Daemon struct {
	Config config.Config
	Node   *node.Node
	// The addresses actually bound (a :0 port resolved).
	PeerAddr, GossipAddr, APIAddr, HTTPAddr string

	log     *slog.Logger
	recv    *lateReceiver
	tr      *transport.GRPC
	peerSrv peerServer
	apiSrv  *grpc.Server
	httpSrv *http.Server
	cancel  context.CancelFunc
	runErr  chan error
	stop    sync.Once
}

// Options are what a caller may add to a config.
type Options struct {
	Logger *slog.Logger
	// Exit is what `electctl kill --exit` calls; nil does nothing.
	Exit func()
}

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
	d.PeerAddr, d.APIAddr, d.HTTPAddr = advertise(cfg, peerLis.Addr()), advertise(cfg, apiLis.Addr()), httpLis.Addr().String()

	store, err := node.OpenTermStore(cfg.DataDir)
	if err != nil {
		closeAll()
		return nil, err
	}
	self := membership.Meta{ID: election.NodeID(cfg.ID), Name: cfg.Name, Priority: cfg.Priority,
		PeerAddr: d.PeerAddr, APIAddr: d.APIAddr, HTTPAddr: d.HTTPAddr}

	// Gossip binds its port on first start; a revived node keeps that port.
	gossipBind := cfg.GossipAddr
	newMembership := func() (node.Membership, error) {
		m, err := membership.New(membership.Config{Self: self, BindAddr: gossipBind, AdvertiseAddr: advertiseHost(cfg),
			Join: cfg.Join, Preset: cfg.GossipPreset, Logger: log})
		if err != nil {
			return nil, err
		}
		gossipBind, d.GossipAddr = m.BoundAddr(), m.LocalAddr()
		return startRejoin(m, cfg.Join, log), nil
	}

	// Bind gossip now, so the address is known when Start returns (dev
	// clusters and callers join it); the node's first Run uses this one.
	first, err := newMembership()
	if err != nil {
		closeAll()
		return nil, err
	}
	fresh := func() (node.Membership, error) {
		if m := first; m != nil {
			first = nil
			return m, nil
		}
		return newMembership()
	}

	var nd *node.Node
	recv := &lateReceiver{}
	tr, err := transport.NewGRPC(transport.GRPCConfig{Self: self.ID, Receiver: recv})
	if err != nil {
		closeAll()
		return nil, err
	}
	nd, err = node.New(node.Config{Self: self, Algorithm: cfg.Algorithm, Tick: cfg.Tick,
		HeartbeatInterval: cfg.HeartbeatInterval, HeartbeatTimeout: cfg.HeartbeatTimeout,
		Quorum: cfg.Quorum, Preempt: cfg.Preempt, BootstrapExpect: cfg.BootstrapExpect, Store: store, NewMembership: fresh,
		Transport: faultyTransport{tr, recv}, Exit: opts.Exit, Logger: log})
	if err != nil {
		tr.Close()
		first.Shutdown()
		closeAll()
		return nil, err
	}
	recv.set(nd)
	d.Node, d.tr, d.recv = nd, tr, recv

	d.peerSrv = newPeerServer(cfg, transport.NewPeerService(self.ID, nd), log)
	d.apiSrv = api.NewGRPCServer(backend{nd})
	d.httpSrv = api.NewHTTPServer(backend{nd})

	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go func() { d.runErr <- nd.Run(ctx) }()
	go d.peerSrv.Serve(peerLis)
	go d.apiSrv.Serve(apiLis)
	go d.httpSrv.Serve(httpLis)
	log.Info("electord started", "id", cfg.ID, "algorithm", cfg.Algorithm, "peer", d.PeerAddr, "api", d.APIAddr,
		"http", d.HTTPAddr, "join", cfg.Join)
	return d, nil
}

// Stop leaves gossip and stops every server; it waits for the loop.
func (d *Daemon) Stop() error {
	var err error
	d.stop.Do(func() {
		d.cancel()
		select {
		case err = <-d.runErr:
		case <-time.After(5 * time.Second):
			err = errors.New("daemon: the instance loop did not stop within 5s")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		d.httpSrv.Shutdown(ctx)
		stopGRPC(d.apiSrv)
		stopGRPC(d.peerSrv)
		d.tr.Close()
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

// rejoin keeps a node connected to its seeds, like Consul's retry_join: it
// retries until a seed answers (a seed may start after this node), and then
// every rejoinEvery it joins again if no seed is a live member (a partition
// healed after gossip gave up on the other side).
type rejoin struct {
	*membership.Membership
	stop chan struct{}
	once sync.Once
}

const (
	retryJoinEvery = 500 * time.Millisecond
	rejoinEvery    = 15 * time.Second
)

func startRejoin(m *membership.Membership, seeds []string, log *slog.Logger) *rejoin {
	r := &rejoin{Membership: m, stop: make(chan struct{})}
	if len(seeds) == 0 {
		return r
	}
	try := func() bool {
		n, err := m.Join(seeds)
		if err != nil || n == 0 {
			log.Debug("no gossip seed answered yet", "join", seeds, "err", err)
			return false
		}
		return true
	}
	joined := try()
	if !joined {
		log.Warn("no gossip seed answered yet; retrying every "+retryJoinEvery.String(), "join", seeds)
	}
	go func() {
		for {
			wait := rejoinEvery
			if !joined {
				wait = retryJoinEvery
			}
			select {
			case <-r.stop:
				return
			case <-time.After(wait):
			}
			if !joined || len(m.Members()) <= 1 {
				if joined = try(); joined {
					log.Info("joined gossip through a seed", "join", seeds)
				}
			}
		}
	}()
	return r
}

// Shutdown stops the retries, then gossip.
func (r *rejoin) Shutdown() error {
	r.once.Do(func() { close(r.stop) })
	return r.Membership.Shutdown()
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

// Block is a fault hook for tests: peer messages to and from ids are
// refused from now on, as if the network between this node and them were
// cut (sends fail as unavailable; their messages are refused). Gossip is not
// affected. Unblock lifts it.
func (d *Daemon) Block(ids ...election.NodeID) {
	d.recv.mu.Lock()
	defer d.recv.mu.Unlock()
	if d.recv.blocked == nil {
		d.recv.blocked = map[election.NodeID]bool{}
	}
	for _, id := range ids {
		d.recv.blocked[id] = true
	}
}

// Unblock lifts every Block.
func (d *Daemon) Unblock() {
	d.recv.mu.Lock()
	d.recv.blocked = nil
	d.recv.mu.Unlock()
}

// errBlocked is the failure a blocked send reports.
var errBlocked = errors.New("daemon: peer blocked by a fault hook")

// faultyTransport drops sends to blocked peers (see Block).
type faultyTransport struct {
	transport.Transport
	recv *lateReceiver
}

func (f faultyTransport) Send(m election.Message) {
	if f.recv.isBlocked(m.To) {
		go f.recv.Failed(m, errBlocked)
		return
	}
	f.Transport.Send(m)
}

// lateReceiver lets the transport exist before the node it feeds, and
// refuses blocked peers.
type lateReceiver struct {
	mu      sync.RWMutex
	r       transport.Receiver
	blocked map[election.NodeID]bool
}

func (l *lateReceiver) isBlocked(id election.NodeID) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.blocked[id]
}

func (l *lateReceiver) set(r transport.Receiver) { l.mu.Lock(); l.r = r; l.mu.Unlock() }

func (l *lateReceiver) get() transport.Receiver { l.mu.RLock(); defer l.mu.RUnlock(); return l.r }

func (l *lateReceiver) Receive(in transport.Inbound) error {
	if l.isBlocked(in.Msg.From) {
		return transport.ErrNotServing
	}
	if r := l.get(); r != nil {
		return r.Receive(in)
	}
	return transport.ErrNotServing
}

func (l *lateReceiver) Failed(m election.Message, err error) {
	if r := l.get(); r != nil {
		r.Failed(m, err)
	}
}

// backend adapts *node.Node to api.Backend.
type backend struct{ *node.Node }

func (b backend) Subscribe() api.Subscription { return b.Node.Subscribe() }
