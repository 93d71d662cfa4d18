package status

import "context"

// Renders counts the views built, for tests: none is built while no page
// is open.
func (s *Server) Renders() uint64 { return s.renders.Load() }

// Poller is what the page's poller does once per Poll: build the view
// (asking every live member) and render it, with one set of connections
// kept across calls. Close closes them.
type Poller struct {
	s *Server
	a *grpcAsker
}

func (s *Server) NewPoller() *Poller { return &Poller{s: s, a: newAsker(s.cfg.PeerCreds)} }

func (p *Poller) Render() ([]byte, error) { return p.s.render(context.Background(), p.a) }

func (p *Poller) Close() { p.a.close() }

// Conns lists the addresses the poller holds a connection to.
func (p *Poller) Conns() []string { return p.a.addrs() }
