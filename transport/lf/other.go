//go:build !linux

package lf

import (
	"net"

	"github.com/electord/electord/transport/lf/engine"
)

// Server is the Leader/Followers pool. Off Linux it cannot be built: New
// returns ErrUnsupported.
type Server struct{}

// newServer returns ErrUnsupported off Linux.
func newServer(*engine.Registry, Config, variant) (*Server, error) {
	return nil, ErrUnsupported
}

// Serve returns ErrUnsupported off Linux.
func (s *Server) Serve(ln net.Listener) error { return ErrUnsupported }

// GracefulStop does nothing off Linux.
func (s *Server) GracefulStop() {}

// Stop does nothing off Linux.
func (s *Server) Stop() {}

// Stats returns zeros off Linux.
func (s *Server) Stats() Stats { return Stats{} }
