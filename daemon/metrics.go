package daemon

import (
	"net"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/electord/electord/membership"
	"github.com/electord/electord/metrics"
	"github.com/electord/electord/security/handshake"
	"github.com/electord/electord/transport"
	"github.com/electord/electord/transport/lf"
)

// opsState is what health-addr's metrics read beyond the node: set by
// Start. With health-addr off, api is nil and nothing is counted.
type opsState struct {
	api *metrics.API
	svc *transport.PeerService
	// handshakes count and log the TLS handshakes the node's servers
	// refuse (a listener appears once its TLS is on), with or without
	// health-addr.
	handshakes *handshake.Refusals
	gossip     atomic.Pointer[membership.Membership] // the node's current gossip
	extra      []prometheus.Collector                // Options.Collectors
}

// initOps prepares the counters Start wires into the servers.
func (d *Daemon) initOps(svc *transport.PeerService) {
	d.ops.svc = svc
	d.ops.handshakes = handshake.New(d.log)
	if d.Config.HealthAddr != "" {
		d.ops.api = metrics.NewAPI()
	}
}

// apiOptions count the client API's calls and watches.
func (d *Daemon) apiOptions() []grpc.ServerOption {
	if d.ops.api == nil {
		return nil
	}
	return d.ops.api.GRPCOptions()
}

// countServers counts the sidecar's requests and the connections of the
// API, the sidecar and (for grpc-go; the L/F pool counts its own) the peer
// port.
func (d *Daemon) countServers(peer, api, http net.Listener) (net.Listener, net.Listener, net.Listener) {
	a := d.ops.api
	if a == nil {
		return peer, api, http
	}
	d.httpSrv.Handler = a.Handler(d.httpSrv.Handler)
	if _, ok := d.peerSrv.(*lf.Server); !ok {
		peer = a.Listener("peer", peer)
	}
	return peer, a.Listener("api", api), a.Listener("http", http)
}

// mountMetrics serves Prometheus /metrics (docs/OPERATIONS.md).
func (d *Daemon) mountMetrics(mux *http.ServeMux) {
	s := metrics.Sources{Node: d.Node, Client: d.tr.Stats, API: d.ops.api, Handshakes: d.ops.handshakes,
		GossipHealth: func() int {
			if m := d.ops.gossip.Load(); m != nil {
				return m.HealthScore()
			}
			return 0
		},
		GossipProofs: func() (refused uint64, unproven int) {
			if m := d.ops.gossip.Load(); m != nil {
				return m.RefusedClaims(), m.Unproven()
			}
			return 0, 0
		}}
	if d.ops.svc != nil {
		s.PeerService = d.ops.svc.Stats
	}
	if p, ok := d.peerSrv.(*lf.Server); ok {
		s.Pool = p.Stats
	}
	if d.APISecurity != nil {
		s.APIDenied = d.APISecurity.Denied
	}
	reg := metrics.Registry(s)
	reg.MustRegister(d.ops.extra...)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
}
