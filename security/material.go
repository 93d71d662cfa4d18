package security

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Files are the PEM files of one holder: the cluster CA, and its own
// certificate and key (Cert and Key may be empty for a client that only
// checks the server).
type Files struct {
	CA, Cert, Key string
}

// DefaultPoll is how often Material checks its files for a change.
const DefaultPoll = 5 * time.Second

// Options of Load.
type Options struct {
	// Cluster, if set, is the cluster the certificate must belong to (and
	// every peer): config key cluster. Empty: the certificate's.
	Cluster string
	// Role, if set, is the role the certificate must have; NodeID, if set,
	// the node id it must name.
	Role   Role
	NodeID uint64
	// Poll is how often the files are checked for a change (0:
	// DefaultPoll; negative: never, call Reload).
	Poll time.Duration
	// Logger gets reloads and reload failures; nil discards.
	Logger *slog.Logger
}

// Material is a holder's CA pool, certificate and key, reloaded when the
// files change on disk: the configs it builds read the current ones at
// every handshake, so a rotation needs no restart. A reload that fails (a
// half-written file, a certificate of another identity) keeps the previous
// material and is logged.
type Material struct {
	files Files
	opts  Options
	log   *slog.Logger
	cur   atomic.Pointer[state]

	mu    sync.Mutex // serializes Reload
	stamp string
	stop  chan struct{}
	once  sync.Once
}

type state struct {
	cert *tls.Certificate // nil: no client certificate
	pool *x509.CertPool
	id   Identity // of cert; zero without one
	ca   string   // the CA's cluster
}

// Load reads the files and starts watching them.
func Load(f Files, o Options) (*Material, error) {
	if f.CA == "" {
		return nil, errors.New("tls-ca: the cluster CA certificate is required")
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, fmt.Errorf("tls-cert and tls-key go together (got cert %q, key %q)", f.Cert, f.Key)
	}
	m := &Material{files: f, opts: o, log: o.Logger, stop: make(chan struct{})}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	st, stamp, err := m.read()
	if err != nil {
		return nil, err
	}
	m.cur.Store(st)
	m.stamp = stamp
	poll := o.Poll
	if poll == 0 {
		poll = DefaultPoll
	}
	if poll > 0 {
		go m.watch(poll)
	}
	return m, nil
}

// Close stops watching the files.
func (m *Material) Close() { m.once.Do(func() { close(m.stop) }) }

// Identity is the identity of the holder's certificate (zero without one).
func (m *Material) Identity() Identity { return m.cur.Load().id }

// Cluster is the cluster every peer must belong to.
func (m *Material) Cluster() string {
	if m.opts.Cluster != "" {
		return m.opts.Cluster
	}
	if st := m.cur.Load(); st.id.Cluster != "" {
		return st.id.Cluster
	}
	return m.cur.Load().ca
}

func (m *Material) watch(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.Reload()
		}
	}
}

// Reload re-reads the files if any changed since the last read and
// reports whether new material is in use.
func (m *Material) Reload() (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	stamp := m.stampNow()
	if stamp == m.stamp {
		return false, nil
	}
	st, stamp, err := m.read()
	if err != nil {
		// Keep the old material; try again when the files change again
		// (a writer may be half-way through).
		m.stamp = stamp
		m.log.Error("tls: reloading certificates failed; keeping the previous ones", "err", err)
		return false, err
	}
	m.cur.Store(st)
	m.stamp = stamp
	m.log.Info("tls: certificates reloaded", "identity", st.id.String(), "cert", m.files.Cert, "ca", m.files.CA)
	return true, nil
}

func (m *Material) stampNow() string {
	var b strings.Builder
	for _, p := range []string{m.files.CA, m.files.Cert, m.files.Key} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			fmt.Fprintf(&b, "%d/%d;", fi.ModTime().UnixNano(), fi.Size())
		} else {
			b.WriteString("?;")
		}
	}
	return b.String()
}

func (m *Material) read() (*state, string, error) {
	stamp := m.stampNow()
	caPEM, err := os.ReadFile(m.files.CA)
	if err != nil {
		return nil, stamp, fmt.Errorf("tls-ca: %w", err)
	}
	st := &state{pool: x509.NewCertPool()}
	if !st.pool.AppendCertsFromPEM(caPEM) {
		return nil, stamp, fmt.Errorf("tls-ca: %s holds no PEM certificate", m.files.CA)
	}
	if ca, err := parseFirstPEM(caPEM); err == nil && len(ca.URIs) == 1 && ca.URIs[0].Scheme == "spiffe" {
		st.ca = ca.URIs[0].Host
	}
	if m.files.Cert == "" {
		return st, stamp, nil
	}
	pair, err := tls.LoadX509KeyPair(m.files.Cert, m.files.Key)
	if err != nil {
		return nil, stamp, fmt.Errorf("tls-cert/tls-key: %w", err)
	}
	id, err := FromCertificate(pair.Leaf)
	if err != nil {
		return nil, stamp, fmt.Errorf("tls-cert %s: %w", m.files.Cert, err)
	}
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: st.pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, stamp, fmt.Errorf("tls-cert %s is not signed by tls-ca %s: %w", m.files.Cert, m.files.CA, err)
	}
	if c := m.opts.Cluster; c != "" && id.Cluster != c {
		return nil, stamp, fmt.Errorf("tls-cert %s names cluster %q (%s), but cluster is %q", m.files.Cert, id.Cluster, id, c)
	}
	if r := m.opts.Role; r != "" && id.Role != r {
		return nil, stamp, fmt.Errorf("tls-cert %s is a %s certificate (%s), want a %s certificate", m.files.Cert, id.Role, id, r)
	}
	if n := m.opts.NodeID; n != 0 && id.NodeID != n {
		return nil, stamp, fmt.Errorf("tls-cert %s names node %s (%s), but this node's id is %d", m.files.Cert, id.Name, id, n)
	}
	st.cert, st.id = &pair, id
	return st, stamp, nil
}

func parseFirstPEM(b []byte) (*x509.Certificate, error) {
	for len(b) > 0 {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type == "CERTIFICATE" {
			return x509.ParseCertificate(blk.Bytes)
		}
	}
	return nil, errors.New("no certificate")
}

// ---- tls.Config builders ----

// ServerConfig is the client API's server side (TLS 1.3): a client
// certificate signed by the CA and naming an identity of this cluster is
// required; which calls it may make is the API's business
// (api.Authorizer).
func (m *Material) ServerConfig() *tls.Config { return m.serverConfig() }

// ClientConfig is the TLS base of the client side towards a node's API:
// the server's certificate must be signed by the CA of the moment and name
// a node of this cluster, and match the host name crypto/tls has as the
// connection's server name, which is empty when an IP address is dialled:
// on its own this config does not check WHICH node answers (any node of
// the cluster can answer for any IP address). API clients use
// ClientCredentials, which check the host dialled (IP addresses included)
// or the node id expected; see docs/SECURITY.md. This holder's
// certificate, if any, is presented.
func (m *Material) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		NextProtos:           []string{"h2"},
		GetClientCertificate: m.getClientCertificate,
		// The chain is verified in VerifyConnection against the CA pool
		// of the moment (RootCAs would be fixed when the config is
		// built); this is the pattern crypto/tls documents for it.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: the server sent no certificate")
			}
			st := m.cur.Load()
			opts := x509.VerifyOptions{Roots: st.pool, DNSName: cs.ServerName, Intermediates: x509.NewCertPool(),
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
				return fmt.Errorf("tls: server certificate: %w", err)
			}
			_, err := m.checkPeer(cs.PeerCertificates, RoleNode, "server")
			return err
		},
	}
}

func (m *Material) getClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if c := m.cur.Load().cert; c != nil {
		return c, nil
	}
	return &tls.Certificate{}, nil // none: the server will refuse
}

// PeerServerTLS is the base of the peer port's server side, for
// peerauth.ServerConfig(m.PeerServerTLS(), m.Cluster()): this node's
// certificate (reloaded at every handshake) and the CA pool as read now
// (ClientCAs). peerauth adds TLS 1.3, ALPN h2, the client certificate
// requirement and the node identity check.
func (m *Material) PeerServerTLS() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"},
		GetCertificate: m.getCertificate, ClientCAs: m.cur.Load().pool}
}

// PeerClientTLS is the base of the peer port's client side, for
// peerauth.ClientConfig(m.PeerClientTLS(), m.Cluster(), id): this node's
// certificate (reloaded at every handshake) and the CA pool as read now
// (RootCAs).
func (m *Material) PeerClientTLS() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"},
		GetClientCertificate: m.getClientCertificate, RootCAs: m.cur.Load().pool}
}

// Pool is the CA pool as read now (the files are re-read when they
// change): the peer port verifies both sides' chains against it at every
// handshake, so a CA bundle rewritten on disk takes effect without a
// restart.
func (m *Material) Pool() *x509.CertPool { return m.cur.Load().pool }

// SidecarConfig serves the sidecar HTTP endpoint with the node's
// certificate; a client certificate is not asked for (probes have none).
func (m *Material) SidecarConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: m.getCertificate}
}

func (m *Material) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := m.cur.Load().cert; c != nil {
		return c, nil
	}
	return nil, errors.New("tls: no certificate configured (tls-cert)")
}

func (m *Material) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"h2"},
		// A fresh config per handshake: the current certificate and CA.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			st := m.cur.Load()
			if st.cert == nil {
				return nil, errors.New("tls: no certificate configured (tls-cert)")
			}
			return &tls.Config{
				MinVersion:   tls.VersionTLS13,
				NextProtos:   []string{"h2"},
				Certificates: []tls.Certificate{*st.cert},
				ClientAuth:   tls.RequireAndVerifyClientCert,
				ClientCAs:    st.pool,
				VerifyConnection: func(cs tls.ConnectionState) error {
					_, err := m.checkPeer(cs.PeerCertificates, "", "client")
					return err
				},
			}, nil
		},
	}
}

// IdentityError is a peer certificate, verified against the CA, that names
// no identity this side accepts (none, another cluster's, another role).
// Its text is Err's; handshake.Classify counts it as a wrong identity.
type IdentityError struct{ Err error }

func (e *IdentityError) Error() string { return e.Err.Error() }
func (e *IdentityError) Unwrap() error { return e.Err }

// checkPeer reads a verified peer's identity and checks its cluster and,
// if want is set, its role; a refusal is an *IdentityError.
func (m *Material) checkPeer(chain []*x509.Certificate, want Role, side string) (Identity, error) {
	id, err := m.peerIdentity(chain, want, side)
	if err != nil {
		return Identity{}, &IdentityError{err}
	}
	return id, nil
}

func (m *Material) peerIdentity(chain []*x509.Certificate, want Role, side string) (Identity, error) {
	if len(chain) == 0 {
		return Identity{}, fmt.Errorf("tls: the %s sent no certificate", side)
	}
	id, err := FromCertificate(chain[0])
	if err != nil {
		return Identity{}, fmt.Errorf("tls: %s %w", side, err)
	}
	if c := m.Cluster(); c != "" && id.Cluster != c {
		return Identity{}, fmt.Errorf("tls: %s %s belongs to cluster %q, not %q", side, id, id.Cluster, c)
	}
	if want != "" && id.Role != want {
		return Identity{}, fmt.Errorf("tls: %s %s is a %s, a %s certificate is required", side, id, id.Role, want)
	}
	return id, nil
}
