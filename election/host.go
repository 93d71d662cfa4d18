package election

// host is the core as an algorithm sees it: the same struct with the Host
// method set only, so an algorithm cannot reach the StateMachine methods
// through it, nor the core's other internals.
type host core

func (c *core) host() *host { return (*host)(c) }

func (h *host) core() *core { return (*core)(h) }

func (h *host) Config() Config                { return h.cfg }
func (h *host) Self() Rank                    { return h.core().self() }
func (h *host) Standing() Standing            { return h.core().standing() }
func (h *host) Ring() []Rank                  { return h.core().ringView() }
func (h *host) Successor(r Rank) Rank         { return h.core().successor(r) }
func (h *host) RankOf(id NodeID) (Rank, bool) { return h.core().rankOf(id) }
func (h *host) Bootstrapping() bool           { return h.core().bootstrap() }
func (h *host) Send(m Message)                { h.core().send(m) }
func (h *host) Broadcast(m Message)           { h.core().broadcast(m) }
func (h *host) NewAttempt() Term              { return h.core().newAttempt() }
func (h *host) Win(t Term)                    { h.core().win(t) }
func (h *host) NoLeader()                     { h.core().giveUp() }
func (h *host) Reassert()                     { h.core().reassert() }
func (h *host) AskLeader()                    { h.core().askLeader() }
func (h *host) Adopt(leader NodeID, t Term) {
	c := h.core()
	if c.q != nil {
		c.adoptQuorum(leader, t)
		return
	}
	if leader == c.cfg.ID {
		c.becomeLeader(t)
		return
	}
	c.follow(leader, t)
}
