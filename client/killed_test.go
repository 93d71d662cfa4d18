package client_test

import (
	"testing"

	"github.com/electord/electord/api/apitest"
)

// With endpoints [killed, live], every call and Watch skip the killed node
// (electctl kill without --exit) and get the live node's answer (issue 10:
// the killed node answered "no leader" and the live one was never asked).
func TestKilledEndpointIsSkipped(t *testing.T) {
	cl := apitest.NewCluster(3)
	cl.Elect(3)
	s1, s2 := serve(t, cl, 1), serve(t, cl, 2)
	serve(t, cl, 3)
	c := newClient(t, []string{s1.Addr, s2.Addr})
	ctx := ctxT(t)
	if _, err := c.Kill(ctx, 1, false); err != nil || !cl.Killed(1) {
		t.Fatalf("Kill 1 = %v", err)
	}
	li, err := c.Leader(ctx)
	if err != nil || li.ID != 3 || !li.HasLeader() {
		t.Fatalf("Leader with [killed, live] = %+v, %v; want node 3 from the live endpoint", li, err)
	}
	st, err := c.Status(ctx)
	if err != nil || st.Self != 2 {
		t.Fatalf("Status with [killed, live] = self %d, %v; want node 2's", st.Self, err)
	}
	if ev := nextLeader(t, c.Watch(ctx)); ev.Endpoint != s2.Addr || ev.Leader.ID != 3 {
		t.Fatalf("Watch with [killed, live]: first event %+v; want node 3 from %s", ev, s2.Addr)
	}
	// Revive reaches the killed node (here through itself, the first endpoint).
	if _, err := c.Revive(ctx, 1); err != nil || cl.Killed(1) {
		t.Fatalf("Revive 1 = %v", err)
	}
	if st, err := c.Status(ctx); err != nil || st.Self != 1 {
		t.Fatalf("Status after revive = self %d, %v; want node 1's again", st.Self, err)
	}
}
