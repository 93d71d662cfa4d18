package status

// Renders counts the views built, for tests: none is built while no page
// is open.
func (s *Server) Renders() uint64 { return s.renders.Load() }
