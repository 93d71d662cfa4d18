// Package peerauth is the identity policy of the peer port's mutual TLS.
//
// Every node's certificate carries exactly one URI SAN of the form
// spiffe://<cluster>/node/<id> (id: the node's election.NodeID in decimal).
// Clients of the API carry spiffe://<cluster>/client/<name> or
// spiffe://<cluster>/admin/<name>; those are refused on the peer port.
//
// Both sides verify the other:
//
//   - ServerConfig: TLS 1.3 only, a client certificate is required and
//     verified against the base config's ClientCAs, and it must name a node
//     of the cluster. The server then binds the identity to the messages:
//     transport.PeerService refuses a message whose From is not the
//     certificate's node (see NodeFromContext).
//   - ClientConfig: TLS 1.3 only, the server's chain is verified against the
//     base config's RootCAs, and instead of a host name its certificate must
//     name the node the transport meant to dial. Peers are dialled by
//     address, which says nothing about who should answer; the node id does.
//
// Certificates used on the peer port need both extended key usages,
// ServerAuth (to serve) and ClientAuth (to dial).
package peerauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/electord/electord/election"
)

// ErrNoIdentity wraps every error about a certificate that names no
// usable node identity.
var ErrNoIdentity = errors.New("peerauth: no node identity")

// NodeIDFromCert returns the node id named by cert's one SPIFFE URI SAN,
// spiffe://<cluster>/node/<id>. Anything else is an error (wrapping
// ErrNoIdentity) that names what was wrong: no URI SAN, more than one,
// another scheme or cluster, a client or admin identity, a malformed or
// zero id.
func NodeIDFromCert(cert *x509.Certificate, cluster string) (election.NodeID, error) {
	if cert == nil {
		return 0, fmt.Errorf("%w: no certificate", ErrNoIdentity)
	}
	if cluster == "" {
		return 0, fmt.Errorf("%w: no cluster name to check against", ErrNoIdentity)
	}
	switch len(cert.URIs) {
	case 0:
		return 0, fmt.Errorf("%w: certificate %q has no URI SAN", ErrNoIdentity, cert.Subject.CommonName)
	case 1:
	default:
		return 0, fmt.Errorf("%w: certificate %q has %d URI SANs, want exactly one", ErrNoIdentity, cert.Subject.CommonName, len(cert.URIs))
	}
	u := cert.URIs[0]
	switch {
	case u.Scheme != "spiffe":
		return 0, fmt.Errorf("%w: URI SAN %q is not spiffe://", ErrNoIdentity, u)
	case u.Host != cluster:
		return 0, fmt.Errorf("%w: URI SAN %q is of cluster %q, not %q", ErrNoIdentity, u, u.Host, cluster)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Port() != "":
		return 0, fmt.Errorf("%w: URI SAN %q has a user, port, query or fragment", ErrNoIdentity, u)
	}
	rest, ok := strings.CutPrefix(u.Path, "/node/")
	if !ok {
		role, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
		return 0, fmt.Errorf("%w: URI SAN %q names a %q, not a node", ErrNoIdentity, u, role)
	}
	id, err := strconv.ParseUint(rest, 10, 64)
	if err != nil || id == 0 || strconv.FormatUint(id, 10) != rest {
		return 0, fmt.Errorf("%w: URI SAN %q: node id %q is not a positive decimal number", ErrNoIdentity, u, rest)
	}
	return election.NodeID(id), nil
}

// NodeURI returns the URI SAN of node id in cluster.
func NodeURI(cluster string, id election.NodeID) string {
	return "spiffe://" + cluster + "/node/" + strconv.FormatUint(uint64(id), 10)
}

// base clones b (or starts empty) and sets what both ends of the peer port
// share: TLS 1.3 only and HTTP/2 by ALPN.
func base(b *tls.Config) *tls.Config {
	var c *tls.Config
	if b != nil {
		c = b.Clone()
	} else {
		c = &tls.Config{}
	}
	c.MinVersion, c.MaxVersion = tls.VersionTLS13, tls.VersionTLS13
	c.NextProtos = []string{"h2"}
	return c
}

// ServerConfig returns the peer port's server configuration made from b
// (Certificates or GetCertificate, ClientCAs; b itself is not changed):
// TLS 1.3 only, ALPN h2, a verified client certificate required, and that
// certificate must name a node of cluster. A VerifyConnection already in b
// runs first. Session tickets are off: peers keep one connection each, and
// a resumed session would skip nothing but the certificate exchange.
func ServerConfig(b *tls.Config, cluster string) *tls.Config {
	return ServerConfigPool(b, cluster, nil)
}

// ServerConfigPool is ServerConfig with the CA pool that client
// certificates must chain to read from pool at every handshake (nil: b's
// ClientCAs, fixed), so a CA bundle rewritten on disk (a move to a new CA)
// takes effect on the peer port without a restart.
func ServerConfigPool(b *tls.Config, cluster string, pool func() *x509.CertPool) *tls.Config {
	c := base(b)
	c.ClientAuth = tls.RequireAndVerifyClientCert
	if pool != nil {
		// crypto/tls would verify against the ClientCAs of the config; the
		// chain is verified below against the pool of the moment instead.
		c.ClientAuth = tls.RequireAnyClientCert
	}
	c.SessionTicketsDisabled = true
	prev := c.VerifyConnection
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if prev != nil {
			if err := prev(cs); err != nil {
				return err
			}
		}
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("%w: the client sent no certificate", ErrNoIdentity)
		}
		if pool != nil {
			if err := verifyChain(cs, pool(), x509.ExtKeyUsageClientAuth, "client"); err != nil {
				return err
			}
		}
		_, err := NodeIDFromCert(cs.PeerCertificates[0], cluster)
		return err
	}
	return c
}

// ClientConfig returns the configuration to dial node want of cluster, made
// from b (Certificates or GetClientCertificate, RootCAs; b itself is not
// changed): TLS 1.3 only, ALPN h2, the server's chain verified against
// b.RootCAs (the system roots if nil) and its certificate required to name
// exactly node want. The host name is not checked: the node id replaces
// it (crypto/tls's own verification is turned off for that reason and done
// here instead, in VerifyConnection, which runs on every connection,
// resumed or not).
func ClientConfig(b *tls.Config, cluster string, want election.NodeID) *tls.Config {
	return ClientConfigPool(b, cluster, want, nil)
}

// ClientConfigPool is ClientConfig with the CA pool the server's chain must
// lead to read from pool at every handshake (nil: b's RootCAs, fixed).
func ClientConfigPool(b *tls.Config, cluster string, want election.NodeID, pool func() *x509.CertPool) *tls.Config {
	c := base(b)
	roots := c.RootCAs
	if pool == nil {
		pool = func() *x509.CertPool { return roots }
	}
	c.InsecureSkipVerify = true
	prev := c.VerifyConnection
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if err := verifyChain(cs, pool(), x509.ExtKeyUsageServerAuth, "server"); err != nil {
			return err
		}
		got, err := NodeIDFromCert(cs.PeerCertificates[0], cluster)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("peerauth: dialled node %d but the server's certificate names node %d", want, got)
		}
		if prev != nil {
			return prev(cs)
		}
		return nil
	}
	return c
}

// verifyChain verifies the peer's chain (side: "server" or "client")
// against roots for usage.
func verifyChain(cs tls.ConnectionState, roots *x509.CertPool, usage x509.ExtKeyUsage, side string) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: the %s sent no certificate", ErrNoIdentity, side)
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{usage}}
	for _, ic := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(ic)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("peerauth: %s certificate: %w", side, err)
	}
	return nil
}

// NodeFromContext returns the node id named by the verified certificate of
// the connection a call came in on (grpc-go's peer.FromContext, whose
// AuthInfo both peer servers fill with credentials.TLSInfo). tls is false
// when the call did not come over TLS (the port is plain): there is then
// no identity to check. With tls true, err says why the certificate names
// no node of cluster.
func NodeFromContext(ctx context.Context, cluster string) (id election.NodeID, tls bool, err error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return 0, false, nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return 0, true, fmt.Errorf("%w: connection security is %s, not tls", ErrNoIdentity, p.AuthInfo.AuthType())
	}
	if len(info.State.PeerCertificates) == 0 {
		return 0, true, fmt.Errorf("%w: the client sent no certificate", ErrNoIdentity)
	}
	id, err = NodeIDFromCert(info.State.PeerCertificates[0], cluster)
	return id, true, err
}
