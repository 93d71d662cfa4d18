package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// File names in a certificate directory (electord certs --dir).
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// NodeFiles are node id's certificate and key in dir.
func NodeFiles(dir string, id uint64) (cert, key string) {
	base := filepath.Join(dir, "node-"+strconv.FormatUint(id, 10))
	return base + ".crt", base + ".key"
}

// ClientFiles are client name's certificate and key in dir (admins too).
func ClientFiles(dir, name string) (cert, key string) {
	base := filepath.Join(dir, "client-"+name)
	return base + ".crt", base + ".key"
}

// CA is a loaded cluster CA.
type CA struct {
	Cluster string
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
}

// CreateCA writes a new CA for cluster into dir (ca.crt, ca.key). It
// refuses to replace an existing ca.key: every certificate it signed would
// stop being trusted.
func CreateCA(dir, cluster string, lifetime time.Duration) (*CA, error) {
	if err := CheckClusterName(cluster); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, CAKeyFile)); err == nil {
		return nil, fmt.Errorf("%s already exists: a new CA would orphan every certificate it signed; use another --dir", filepath.Join(dir, CAKeyFile))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := template("electord CA "+cluster, lifetime)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.MaxPathLenZero = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	tmpl.URIs = []*url.URL{{Scheme: "spiffe", Host: cluster}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	if err := writePair(filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile), der, key); err != nil {
		return nil, err
	}
	return &CA{Cluster: cluster, Cert: cert, Key: key}, nil
}

// LoadCA reads dir's ca.crt and ca.key; the cluster name is the CA's URI.
func LoadCA(dir string) (*CA, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("loading the CA from %s (create one with electord certs ca): %w", dir, err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ECDSA key", filepath.Join(dir, CAKeyFile))
	}
	cert := pair.Leaf
	if len(cert.URIs) != 1 || cert.URIs[0].Scheme != "spiffe" || cert.URIs[0].Host == "" {
		return nil, fmt.Errorf("%s: the CA has no spiffe://<cluster> URI SAN", filepath.Join(dir, CACertFile))
	}
	return &CA{Cluster: cert.URIs[0].Host, Cert: cert, Key: key}, nil
}

// IssueNode writes node id's certificate (server and client usage; hosts
// are its IP addresses and DNS names) and key into dir.
func (ca *CA) IssueNode(dir string, id uint64, hosts []string, lifetime time.Duration) (certFile, keyFile string, err error) {
	if id == 0 {
		return "", "", errors.New("node id must be non-zero")
	}
	tmpl := template("node-"+strconv.FormatUint(id, 10), lifetime)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, h := range hosts {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	certFile, keyFile = NodeFiles(dir, id)
	return certFile, keyFile, ca.issue(tmpl, NodeIdentity(ca.Cluster, id), certFile, keyFile)
}

// IssueClient writes a client (or, with admin, an admin) certificate and
// key for name into dir.
func (ca *CA) IssueClient(dir, name string, admin bool, lifetime time.Duration) (certFile, keyFile string, err error) {
	if err := CheckName(name); err != nil {
		return "", "", err
	}
	role := RoleClient
	if admin {
		role = RoleAdmin
	}
	tmpl := template(name, lifetime)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	certFile, keyFile = ClientFiles(dir, name)
	return certFile, keyFile, ca.issue(tmpl, Identity{Cluster: ca.Cluster, Role: role, Name: name}, certFile, keyFile)
}

func (ca *CA) issue(tmpl *x509.Certificate, id Identity, certFile, keyFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.URIs = []*url.URL{id.URI()}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(certFile), 0o700); err != nil {
		return err
	}
	return writePair(certFile, keyFile, der, key)
}

func template(cn string, lifetime time.Duration) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"electord"}},
		NotBefore:    now.Add(-5 * time.Minute), // clock skew
		NotAfter:     now.Add(lifetime),
	}
}

// writePair writes the key, then the certificate, each to a temporary file
// renamed into place, so a reloading node never reads half a file.
func writePair(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeAtomic(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return err
	}
	return writeAtomic(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
