// Package security is electord's identity and TLS: a cluster CA, node and
// client certificates whose URI SAN names who holds them, files reloaded
// when they change on disk, and the *tls.Config of every port.
//
// Identities are SPIFFE-style URIs in the certificate's SAN:
//
//	spiffe://<cluster>/node/<id>      a node (server and client usage)
//	spiffe://<cluster>/client/<name>  a reader: GetLeader, WatchLeader, Status, Members
//	spiffe://<cluster>/admin/<name>   an operator: also Kill, Revive, Resign, Transfer
//
// The CA carries spiffe://<cluster> itself, so `electord certs` knows the
// cluster name from the CA alone.
package security

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Role is what an identity may do.
type Role string

// Roles.
const (
	RoleNode   Role = "node"
	RoleClient Role = "client"
	RoleAdmin  Role = "admin"
)

// Identity is who a certificate names.
type Identity struct {
	Cluster string
	Role    Role
	NodeID  uint64 // RoleNode only
	Name    string // RoleClient and RoleAdmin: the client's name; RoleNode: the decimal id
}

// URI is the identity as it appears in a certificate's URI SAN.
func (id Identity) URI() *url.URL {
	return &url.URL{Scheme: "spiffe", Host: id.Cluster, Path: "/" + string(id.Role) + "/" + id.Name}
}

func (id Identity) String() string { return id.URI().String() }

// NodeIdentity is node id of cluster.
func NodeIdentity(cluster string, id uint64) Identity {
	return Identity{Cluster: cluster, Role: RoleNode, NodeID: id, Name: strconv.FormatUint(id, 10)}
}

// ErrNoIdentity: a certificate without a spiffe:// URI SAN.
var ErrNoIdentity = errors.New("no spiffe:// URI SAN")

// ParseURI reads an identity URI. Errors name what is wrong.
func ParseURI(s string) (Identity, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Identity{}, fmt.Errorf("identity %q: %v", s, err)
	}
	if u.Scheme != "spiffe" {
		return Identity{}, fmt.Errorf("identity %q: scheme %q, want spiffe", s, u.Scheme)
	}
	if err := CheckClusterName(u.Host); err != nil {
		return Identity{}, fmt.Errorf("identity %q: %v", s, err)
	}
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if len(parts) != 2 || parts[1] == "" {
		return Identity{}, fmt.Errorf("identity %q: path %q, want /node/<id>, /client/<name> or /admin/<name>", s, u.Path)
	}
	id := Identity{Cluster: u.Host, Role: Role(parts[0]), Name: parts[1]}
	switch id.Role {
	case RoleNode:
		n, err := strconv.ParseUint(parts[1], 10, 64)
		if err != nil || n == 0 {
			return Identity{}, fmt.Errorf("identity %q: node id %q is not a positive integer", s, parts[1])
		}
		id.NodeID = n
	case RoleClient, RoleAdmin:
		if err := CheckName(id.Name); err != nil {
			return Identity{}, fmt.Errorf("identity %q: %v", s, err)
		}
	default:
		return Identity{}, fmt.Errorf("identity %q: role %q, want node, client or admin", s, parts[0])
	}
	return id, nil
}

// FromCertificate reads the identity of a certificate: its one spiffe://
// URI SAN.
func FromCertificate(c *x509.Certificate) (Identity, error) {
	var found []string
	for _, u := range c.URIs {
		if u.Scheme == "spiffe" {
			found = append(found, u.String())
		}
	}
	switch len(found) {
	case 0:
		return Identity{}, fmt.Errorf("certificate %q: %w (want spiffe://<cluster>/node/<id>, /client/<name> or /admin/<name>)", c.Subject.CommonName, ErrNoIdentity)
	case 1:
		id, err := ParseURI(found[0])
		if err != nil {
			return Identity{}, fmt.Errorf("certificate %q: %w", c.Subject.CommonName, err)
		}
		return id, nil
	}
	return Identity{}, fmt.Errorf("certificate %q: %d spiffe:// URI SANs (%s), want one", c.Subject.CommonName, len(found), strings.Join(found, ", "))
}

// CheckClusterName accepts a DNS-label-like cluster name.
func CheckClusterName(s string) error {
	if s == "" {
		return errors.New("cluster name is empty")
	}
	if err := CheckName(s); err != nil {
		return fmt.Errorf("cluster name: %v", err)
	}
	return nil
}

// CheckName accepts 1-63 letters, digits, '-', '_' and '.'.
func CheckName(s string) error {
	if s == "" || len(s) > 63 {
		return fmt.Errorf("name %q: want 1 to 63 characters", s)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("name %q: only letters, digits, '-', '_' and '.' are allowed", s)
		}
	}
	return nil
}
