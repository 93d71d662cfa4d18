package apitest

import (
	"net"
	"time"

	"github.com/electord/electord/api"
	"github.com/electord/electord/security"
)

// NodeMaterial issues node id's certificate, naming hosts, from ca into
// dir and loads it (not watched: Poll -1).
func NodeMaterial(ca *security.CA, dir string, id uint64, hosts ...string) (*security.Material, error) {
	crt, key, err := ca.IssueNode(dir, id, hosts, time.Hour)
	if err != nil {
		return nil, err
	}
	return security.Load(security.Files{CA: dir + "/" + security.CACertFile, Cert: crt, Key: key}, security.Options{Poll: -1})
}

// ServeSecure serves the Elector service of b on a loopback port as a node
// with TLS on does: m's certificate, authorization for cluster, commands
// forwarded with m's ForwardCredentials. Stop it when done.
func ServeSecure(b api.Backend, m *security.Material, cluster string) (*Server, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	sec := &api.Security{ServerTLS: m.ServerConfig(), Forward: m.ForwardCredentials, Cluster: cluster}
	srv, err := api.NewSecureGRPCServer(b, Limits(), sec)
	if err != nil {
		lis.Close()
		return nil, err
	}
	s := &Server{Addr: lis.Addr().String(), srv: srv, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(lis)
	}()
	return s, nil
}

// ServeSecureOne serves a fake one-node cluster, node 1 leading, as
// ServeSecure does, node 1's certificate issued from ca into dir naming
// hosts. Stop the server when done.
func ServeSecureOne(ca *security.CA, dir string, hosts ...string) (*Cluster, *Server, error) {
	m, err := NodeMaterial(ca, dir, 1, hosts...)
	if err != nil {
		return nil, nil, err
	}
	c := NewCluster(1)
	c.Elect(1)
	s, err := ServeSecure(c.Node(1), m, ca.Cluster)
	return c, s, err
}
