package handshake

import (
	"net"

	"google.golang.org/grpc/credentials"
)

// Credentials are a gRPC server's transport credentials c (grpc.Creds)
// with every handshake they refuse recorded in r. grpc-go runs
// ServerHandshake on its own goroutine per connection, within its
// ConnectionTimeout, and tells nobody why one failed: this is the one place
// that sees the error.
func Credentials(c credentials.TransportCredentials, r *Recorder) credentials.TransportCredentials {
	return &observed{TransportCredentials: c, r: r}
}

type observed struct {
	credentials.TransportCredentials
	r *Recorder
}

func (o *observed) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, info, err := o.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		o.r.Refused(raw.RemoteAddr(), err)
	}
	return c, info, err
}

func (o *observed) Clone() credentials.TransportCredentials {
	return &observed{TransportCredentials: o.TransportCredentials.Clone(), r: o.r}
}
