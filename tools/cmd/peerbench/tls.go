//go:build linux

package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport/peerauth"
	"github.com/electord/electord/transport/peerauth/peerauthtest"
)

// --tls: both sides speak the peer port's mutual TLS (peerauth's configs,
// TLS 1.3, a verified node certificate each way). The parent makes a
// throw-away CA and two node certificates, the server's (selfID) and the
// client's (clientID), in a temporary directory it hands to every server
// process (--tls-dir).
const (
	benchCluster                 = "peerbench"
	clientID     election.NodeID = 2
)

// clientTLS is the client side's config with --tls (nil: plaintext). Every
// client of the run (raw and grpc-go) dials with it.
var clientTLS *tls.Config

// makeTLSDir writes ca.pem, server.pem, server-key.pem, client.pem and
// client-key.pem into a new temporary directory and sets clientTLS.
func makeTLSDir() (string, error) {
	ca, err := peerauthtest.NewCA()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "peerbench-tls-")
	if err != nil {
		return "", err
	}
	write := func(name, typ string, der []byte) error {
		return os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
	}
	if err := write("ca.pem", "CERTIFICATE", ca.Cert.Raw); err != nil {
		return "", err
	}
	for name, id := range map[string]election.NodeID{"server": selfID, "client": clientID} {
		cert, err := ca.Node(benchCluster, id)
		if err != nil {
			return "", err
		}
		key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
		if err != nil {
			return "", err
		}
		if err := write(name+".pem", "CERTIFICATE", cert.Certificate[0]); err != nil {
			return "", err
		}
		if err := write(name+"-key.pem", "PRIVATE KEY", key); err != nil {
			return "", err
		}
	}
	base, err := loadTLSBase(dir, "client")
	if err != nil {
		return "", err
	}
	clientTLS = peerauth.ClientConfig(base, benchCluster, selfID)
	return dir, nil
}

// loadTLSBase reads who's certificate and the CA from dir.
func loadTLSBase(dir, who string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, who+".pem"), filepath.Join(dir, who+"-key.pem"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("peerbench: no CA certificate in ca.pem")
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ClientCAs: pool}, nil
}

// serverTLS is the server process's config for --tls-dir dir.
func serverTLS(dir string) (*tls.Config, error) {
	base, err := loadTLSBase(dir, "server")
	if err != nil {
		return nil, err
	}
	return peerauth.ServerConfig(base, benchCluster), nil
}
