package daemon

import (
	"context"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport/peerauth"
)

// proveFunc is membership.Config.Prove for this daemon: every member, and
// every claimant of an id or a term slot, proves its id with a mutual TLS
// handshake on the peer address it gossips, presenting a certificate of the
// cluster's CA for that id (peerauth.Prover), before it counts. Fresh:
// membership asks once per member's address and life, and a proof must be
// of the process there now. nil when the peer port is plaintext: then
// nothing can prove an id, and membership admits and settles claims as
// docs/SECURITY.md says (what remains open without TLS).
func (d *Daemon) proveFunc() func(ctx context.Context, id election.NodeID, peerAddr string) error {
	p := d.PeerTLS
	if p == nil || p.Cluster == "" || p.Server == nil || p.Client == nil || peerTLSHook == nil {
		return nil
	}
	pr := &peerauth.Prover{Client: p.Client, Cluster: p.Cluster, Pool: p.Pool, Served: p.Served, Fresh: true}
	return pr.Prove
}
