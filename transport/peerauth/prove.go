package peerauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/electord/electord/election"
)

// Proving an id. Gossip tells who claims an id or a term
// slot, but anyone with the gossip key can gossip any id. With peer TLS an
// id is bound to a certificate, so a claim is checked on the peer port: the
// prover dials the claimant's peer address with the node's own client
// certificate, and the server there must present a certificate of the
// cluster's CA for the claimed id (ClientConfigPool's check).
//
// A TCP relay at the claimant's address could pass the handshake through to
// the real holder of the id; when that holder is the proving node itself
// (an outsider claiming this node's id while pointing its peer address at a
// relay to this very node), the proof is refused: every handshake the
// node's peer server serves records its TLS exporter value (Served.Mark),
// the prover derives the same value on its side of the connection, and
// finding it among its own server's handshakes (Prover.Served) means the
// address leads back here. The record is per node, not per process: in a
// process that runs several nodes (electord dev) a handshake another node
// served is no relay back to this one.

// ErrSelf is returned by Prove when the address leads back to this node.
var ErrSelf = errors.New("peerauth: the claimant's peer address leads back to this node itself (a relay)")

// proofLabel is the TLS exporter label both ends derive.
const proofLabel = "EXPORTER-electord-identity-proof"

// Served is the exporter values of the handshakes one peer server served
// recently (see Mark), oldest overwritten first. The zero value is ready.
type Served struct {
	mu   sync.Mutex
	ring [256][32]byte
	next int
	n    int
}

// Mark returns a clone of b (a peer server's base config) whose
// VerifyConnection also records each handshake's exporter value in s, so
// that a Prover with Served s can tell a relay back to this server. A
// VerifyConnection already in b runs first.
func (s *Served) Mark(b *tls.Config) *tls.Config {
	if b == nil {
		return nil
	}
	c := b.Clone()
	prev := c.VerifyConnection
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if prev != nil {
			if err := prev(cs); err != nil {
				return err
			}
		}
		if v, err := cs.ExportKeyingMaterial(proofLabel, nil, 32); err == nil {
			s.mu.Lock()
			copy(s.ring[s.next][:], v)
			s.next = (s.next + 1) % len(s.ring)
			s.n = min(s.n+1, len(s.ring))
			s.mu.Unlock()
		}
		return nil
	}
	return c
}

// has reports whether v is the exporter value of a handshake s recorded.
func (s *Served) has(v []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.n {
		if string(s.ring[i][:]) == string(v) {
			return true
		}
	}
	return false
}

// Prover checks, over TLS, that the node at a peer address holds a
// certificate for the id it claims. Results are cached per address and id
// (successes for ProvenTTL, failures for RefusedTTL; none with Fresh) and
// concurrent proofs of one address and id share one handshake. Safe for
// concurrent use.
type Prover struct {
	// Client is the node's base client config (its certificate, RootCAs).
	Client *tls.Config
	// Cluster is the cluster name every node certificate carries.
	Cluster string
	// Pool, if set, is the CA pool of the moment (see ClientConfigPool).
	Pool func() *x509.CertPool
	// Served is what this node's own peer server records (Served.Mark): an
	// address whose handshake is among it leads back here (ErrSelf). Nil:
	// that check is left out.
	Served *Served
	// Timeout bounds one proof (0: 3 s).
	Timeout time.Duration
	// Fresh: no outcome is reused, every Prove that does not join one under
	// way makes its own handshake. For a caller that keeps its own record
	// of proofs and asks again only when something changed (membership
	// proves a member once per address and life): a cached success would
	// vouch for whatever listens at the address now, a process that may
	// have died since and an address another party may have taken over.
	Fresh bool

	mu    sync.Mutex
	cache map[proofKey]*proof
}

// ProvenTTL and RefusedTTL are how long a proof's outcome is reused.
const (
	ProvenTTL  = time.Minute
	RefusedTTL = 5 * time.Second
)

type proofKey struct {
	id   election.NodeID
	addr string
}

type proof struct {
	done chan struct{}
	at   time.Time
	err  error
}

// Prove returns nil if the server at addr (host:port of a peer port)
// completes a mutual TLS handshake presenting a certificate of the cluster
// for node id and is not this node's own peer server (Served); otherwise an error that says
// why (ErrSelf for a relay back here).
func (p *Prover) Prove(ctx context.Context, id election.NodeID, addr string) error {
	k := proofKey{id, addr}
	p.mu.Lock()
	if p.cache == nil {
		p.cache = make(map[proofKey]*proof)
	}
	if pr := p.cache[k]; pr != nil {
		select {
		case <-pr.done:
			ttl := ProvenTTL
			if pr.err != nil {
				ttl = RefusedTTL
			}
			if !p.Fresh && time.Since(pr.at) < ttl {
				p.mu.Unlock()
				return pr.err
			}
		default:
			p.mu.Unlock()
			select {
			case <-pr.done:
				return pr.err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if len(p.cache) >= 1024 {
		for kk, pr := range p.cache {
			select {
			case <-pr.done:
				if time.Since(pr.at) >= ProvenTTL {
					delete(p.cache, kk)
				}
			default:
			}
		}
	}
	pr := &proof{done: make(chan struct{})}
	p.cache[k] = pr
	p.mu.Unlock()

	pr.err = p.prove(ctx, id, addr)
	pr.at = time.Now()
	close(pr.done)
	return pr.err
}

func (p *Prover) prove(ctx context.Context, id election.NodeID, addr string) error {
	if addr == "" {
		return errors.New("it gossips no peer address")
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("its peer address %q is not host:port", addr)
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := tls.Dialer{Config: ClientConfigPool(p.Client, p.Cluster, id, p.Pool)}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("no TLS handshake with a certificate for node %d at its peer address %s: %w", id, addr, err)
	}
	defer c.Close()
	tc := c.(*tls.Conn)
	cs := tc.ConnectionState()
	v, err := cs.ExportKeyingMaterial(proofLabel, nil, 32)
	if err != nil {
		return fmt.Errorf("peer address %s: %w", addr, err)
	}
	// The server records its value when it has verified this side's
	// certificate, which it does after this side's handshake returned: wait
	// for its first bytes (an HTTP/2 server answers the preface with its
	// SETTINGS) before looking.
	if dl, ok := ctx.Deadline(); ok {
		tc.SetDeadline(dl)
	}
	if _, err := tc.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")); err == nil {
		var b [1]byte
		tc.Read(b[:])
	}
	if p.Served != nil && p.Served.has(v) {
		return ErrSelf
	}
	return nil
}
