package main

import (
	crand "crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/electord/electord/security"
)

// secure (--secure) runs every benchmark cluster as a production cluster
// should run (issue 12): mutual TLS on the peer and API ports with
// certificates from a CA made for the run, and an encrypted gossip ring.
// electbench itself talks to the nodes' API with an admin certificate.
var secure bool

// pki is one cluster's certificates and gossip key.
type pki struct {
	dir       string
	ca        *security.CA
	gossipKey string
	material  *security.Material // electbench's own client certificate
}

func newPKI(dir string) (*pki, error) {
	p := &pki{dir: filepath.Join(dir, "certs")}
	var err error
	if p.ca, err = security.CreateCA(p.dir, "electbench", 24*time.Hour); err != nil {
		return nil, err
	}
	cert, key, err := p.ca.IssueClient(p.dir, "electbench", true, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	k := make([]byte, 32)
	if _, err := crand.Read(k); err != nil {
		return nil, err
	}
	p.gossipKey = filepath.Join(p.dir, "gossip.key")
	if err := os.WriteFile(p.gossipKey, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		return nil, err
	}
	p.material, err = security.Load(security.Files{CA: filepath.Join(p.dir, security.CACertFile), Cert: cert, Key: key}, security.Options{})
	if err != nil {
		return nil, fmt.Errorf("electbench's client certificate: %w", err)
	}
	return p, nil
}

// nodeArgs issues node id's certificate and returns its TLS and gossip flags.
func (p *pki) nodeArgs(id int) ([]string, error) {
	cert, key, err := p.ca.IssueNode(p.dir, uint64(id), []string{"127.0.0.1"}, 24*time.Hour)
	if err != nil {
		return nil, fmt.Errorf("node %d's certificate: %w", id, err)
	}
	return []string{"--tls-cert", cert, "--tls-key", key, "--tls-ca", filepath.Join(p.dir, security.CACertFile),
		"--gossip-key-file", p.gossipKey, "--cluster", "electbench", "--name", "node-" + strconv.Itoa(id)}, nil
}

func (p *pki) creds() credentials.TransportCredentials {
	return p.material.ClientCredentials(security.Expect{}) // nodes are dialled at 127.0.0.1, which their certificates name
}

func (p *pki) close() {
	if p != nil {
		p.material.Close()
	}
}

// secureFlag registers --secure on fs.
func secureFlag(fs *flag.FlagSet) {
	fs.BoolVar(&secure, "secure", false, "run every cluster with mutual TLS (peer and API ports) and an encrypted gossip ring, with certificates made for the run")
}
