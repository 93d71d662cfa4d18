// Package handshake counts and logs the TLS handshakes a node's servers
// refuse: on the peer port, the client API (gRPC) and the sidecar HTTP
// endpoint with http-tls. Each refusal is put in one of a few reasons
// (Reason), counted per listener and reason, and logged with its remote
// address at most once per listener and reason per LogEvery.
//
// Only refusals cost anything: a handshake that succeeds passes through
// one error check.
package handshake

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/electord/electord/security"
	"github.com/electord/electord/transport/peerauth"
)

// Reason is why a handshake was refused: a small fixed set, so the metric's
// label has a bounded number of values.
type Reason uint8

// The reasons, in the order the metric lists them.
const (
	// NoCertificate: the port requires a client certificate and the
	// client sent none.
	NoCertificate Reason = iota
	// UnknownAuthority: the client's certificate is not signed by the
	// cluster's CA (another cluster's CA, a self-signed certificate).
	UnknownAuthority
	// Expired: the client's certificate is expired or not yet valid.
	Expired
	// WrongIdentity: a certificate of the CA that names no identity this
	// port accepts: another cluster, a client or admin certificate on the
	// peer port, no spiffe:// URI, or the wrong key usage.
	WrongIdentity
	// BadCertificate: a certificate that is invalid for another reason
	// (malformed, a chain the CA may not sign, a bad signature).
	BadCertificate
	// RefusedByClient: the client ended the handshake with an alert: it
	// does not accept this node's certificate (it trusts another CA, or
	// it dialled another node id) or its parameters.
	RefusedByClient
	// NotTLS: the first bytes are not a TLS record (a plaintext client).
	NotTLS
	// Protocol: no TLS version, cipher suite, key exchange or ALPN protocol
	// in common (a TLS 1.2-only client: every port is TLS 1.3 only).
	Protocol
	// Timeout: the handshake did not end within handshake-timeout.
	Timeout
	// Closed: the client closed the connection before the handshake ended
	// (a TCP probe, a port scan, a client that gave up).
	Closed
	// Other: anything else.
	Other

	numReasons = iota
)

var reasonNames = [numReasons]string{"no_certificate", "unknown_authority", "expired", "wrong_identity",
	"bad_certificate", "refused_by_client", "not_tls", "protocol", "timeout", "closed", "other"}

// String is the reason as the metric's label value.
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "other"
}

// Reasons are every reason, in order.
func Reasons() []Reason {
	rs := make([]Reason, numReasons)
	for i := range rs {
		rs[i] = Reason(i)
	}
	return rs
}

// crypto/tls reports a few refusals with an error of no type of its own
// (read from Go 1.26's handshake_server*.go, and grpc-go's
// credentials/tls.go). Those, and only those, are told apart by their
// text. The daemon's TestRefusedHandshakesCountedAndLogged makes a missing
// certificate, a TLS 1.2 client, an unknown ALPN protocol, no ALPN (grpc-go)
// and an unparsable certificate with real clients, so a release that
// rewords one of them fails it instead of moving it to Other unnoticed;
// the others (a legacy version field, no cipher suite or key exchange in
// common) take a hand-made ClientHello and are not tested.
var untyped = []struct {
	prefix string
	reason Reason
}{
	{"tls: client didn't provide a certificate", NoCertificate},
	{"tls: client offered only unsupported versions", Protocol},
	{"tls: client offered TLS version older than TLS 1.3", Protocol},
	{"tls: no cipher suite supported by both client and server", Protocol},
	{"tls: no key exchanges supported by both client and server", Protocol},
	{"tls: client requested unsupported application protocols", Protocol},
	{"tls: failed to parse client certificate", BadCertificate},
	// grpc-go's, for a client that offers no ALPN protocol at all.
	{"credentials: cannot check peer: missing selected ALPN property", Protocol},
}

// Classify is the reason of a server handshake's error (nil: Other). Typed
// errors are matched by type: x509's verification errors (crypto/tls's or
// those of a VerifyConnection of electord, which wrap them), electord's
// identity errors (security.IdentityError, peerauth.ErrNoIdentity),
// tls.RecordHeaderError, a net.Error's timeout, the alert the client sent
// (a *net.OpError "remote error"), io.EOF and a reset.
func Classify(err error) Reason {
	if err == nil {
		return Other
	}
	var (
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
		record   tls.RecordHeaderError
		ident    *security.IdentityError
		op       *net.OpError
		nerr     net.Error
	)
	switch {
	case errors.As(err, &unknown):
		return UnknownAuthority
	case errors.As(err, &invalid):
		switch invalid.Reason {
		case x509.Expired:
			return Expired
		case x509.IncompatibleUsage, x509.NameMismatch, x509.NameConstraintsWithoutSANs, x509.CANotAuthorizedForThisName:
			return WrongIdentity
		}
		return BadCertificate
	case errors.As(err, &hostname), errors.As(err, &ident), errors.Is(err, peerauth.ErrNoIdentity):
		return WrongIdentity
	case errors.As(err, &record):
		return NotTLS
	case errors.As(err, &op) && op.Op == "remote error":
		return RefusedByClient
	case errors.As(err, &nerr) && nerr.Timeout():
		return Timeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return Closed
	}
	msg := err.Error()
	for _, u := range untyped {
		if strings.HasPrefix(msg, u.prefix) {
			return u.reason
		}
	}
	return Other
}
