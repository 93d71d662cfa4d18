// Package peerauthtest makes throw-away certificates for the peer port's
// tests and benchmarks: an ECDSA P-256 CA and leaf certificates carrying a
// SPIFFE URI SAN, in memory. Not for production (see `electord certs`).
package peerauthtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport/peerauth"
)

// CA is a test certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	Pool *x509.CertPool
}

var serial atomic.Int64

// NewCA returns a fresh self-signed CA.
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: "electord test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Key: key, Pool: pool}, nil
}

// Leaf returns a certificate signed by ca with the given URI SANs (none if
// uris is empty), valid for 127.0.0.1 and localhost, with both the
// ServerAuth and ClientAuth usages.
func (ca *CA) Leaf(name string, uris ...string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			return tls.Certificate{}, err
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// Node returns the certificate of node id of cluster.
func (ca *CA) Node(cluster string, id election.NodeID) (tls.Certificate, error) {
	return ca.Leaf("node", peerauth.NodeURI(cluster, id))
}

// Base returns the base config of a node: its certificate, and ca as the
// roots on both sides. Give it to peerauth.ServerConfig / ClientConfig.
func (ca *CA) Base(cert tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: ca.Pool, ClientCAs: ca.Pool}
}

// NodeBase is Node followed by Base.
func (ca *CA) NodeBase(cluster string, id election.NodeID) (*tls.Config, error) {
	cert, err := ca.Node(cluster, id)
	if err != nil {
		return nil, err
	}
	return ca.Base(cert), nil
}
