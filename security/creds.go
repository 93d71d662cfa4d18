package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc/credentials"
)

// Expect is which node an API client means to reach.
type Expect struct {
	// NodeID, if set, is the node the server must be: its certificate must
	// name spiffe://<cluster>/node/<NodeID>, whatever address was dialled
	// (a node forwarding a command to the leader, the status page asking
	// member N; pod IPs are not known when certificates are made). Zero:
	// the certificate must name the host dialled, in a DNS or an IP SAN.
	NodeID uint64
}

// ClientCredentials are the gRPC transport credentials towards a node's
// API: ClientConfig's checks (TLS 1.3, the chain against the CA pool of
// the moment, a node certificate of this cluster) plus which node answers,
// as expect says: the node id it names, or (NodeID zero) the host of the
// address dialled, IP addresses included. This holder's certificate, if
// any, is presented.
func (m *Material) ClientCredentials(expect Expect) credentials.TransportCredentials {
	return &clientCreds{m: m, expect: expect}
}

type clientCreds struct {
	m      *Material
	expect Expect
}

func (c *clientCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	host := authority
	if h, _, err := net.SplitHostPort(authority); err == nil {
		host = h
	}
	cfg := c.m.ClientConfig()
	if net.ParseIP(host) == nil {
		cfg.ServerName = host // SNI; crypto/tls sends none for an IP
	}
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		return c.m.verifyServer(cs.PeerCertificates, authority, host, c.expect)
	}
	return credentials.NewTLS(cfg).ClientHandshake(ctx, authority, raw)
}

func (c *clientCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("security: ClientCredentials serve no connection (use ServerConfig)")
}

func (c *clientCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.3"}
}

func (c *clientCreds) Clone() credentials.TransportCredentials {
	cp := *c
	return &cp
}

// OverrideServerName is not supported: the name checked is the one dialled.
//
// Deprecated: part of grpc's interface only.
func (c *clientCreds) OverrideServerName(string) error {
	return errors.New("security: ClientCredentials check the address dialled; the server name cannot be overridden")
}

// verifyServer checks the server's chain against the CA pool of the
// moment, that it is a node of this cluster, and that it is the node
// expected: the id of expect, or one whose certificate names host.
func (m *Material) verifyServer(chain []*x509.Certificate, authority, host string, expect Expect) error {
	if len(chain) == 0 {
		return errors.New("tls: the server sent no certificate")
	}
	st := m.cur.Load()
	opts := x509.VerifyOptions{Roots: st.pool, Intermediates: x509.NewCertPool(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := chain[0].Verify(opts); err != nil {
		return fmt.Errorf("tls: server certificate at %s: %w", authority, err)
	}
	id, err := m.checkPeer(chain, RoleNode, "server")
	if err != nil {
		return err
	}
	if expect.NodeID != 0 {
		if id.NodeID != expect.NodeID {
			return fmt.Errorf("tls: the server at %s is %s, not node %d (%s)", authority, id, expect.NodeID,
				NodeIdentity(m.Cluster(), expect.NodeID))
		}
		return nil
	}
	if err := chain[0].VerifyHostname(host); err != nil {
		// No ": " after the prefix: clients that show the last part of a
		// gRPC error (client.reason) keep the whole reason.
		return fmt.Errorf("tls: the server at %s is %s, whose certificate does not name %s (it names %s)",
			authority, id, host, sans(chain[0]))
	}
	return nil
}

// sans lists a certificate's DNS and IP SANs.
func sans(c *x509.Certificate) string {
	var s []string
	for _, d := range c.DNSNames {
		s = append(s, "DNS:"+d)
	}
	for _, ip := range c.IPAddresses {
		s = append(s, "IP:"+ip.String())
	}
	if len(s) == 0 {
		return "none (no DNS or IP SAN)"
	}
	return strings.Join(s, ", ")
}

// ForwardCredentials returns, for a node id, the credentials to dial that
// node's API with (ClientCredentials expecting the id): what api.Security
// forwards commands with.
func (m *Material) ForwardCredentials(id uint64) credentials.TransportCredentials {
	return m.ClientCredentials(Expect{NodeID: id})
}
