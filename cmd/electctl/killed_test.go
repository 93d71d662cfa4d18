package main

import (
	"strings"
	"testing"
)

// electctl --endpoints killed,live leader: the killed node (electctl kill
// without --exit) is skipped and the live one answers (issue 10: it exited 5
// "no leader known" and never tried the live endpoint). revive through the
// killed node's own endpoint still works.
func TestKilledEndpointIsSkipped(t *testing.T) {
	f := newFixture(t)
	if r := electctl(t, "--endpoints", f.addr(1), "kill", "1"); r.code != ExitOK {
		t.Fatalf("kill 1: %+v", r)
	}
	eps := f.addr(1) + "," + f.addr(2)
	r := electctl(t, "--endpoints", eps, "leader", "-o", "json")
	if r.code != ExitOK || !strings.Contains(r.stdout, `"id": 3`) && !strings.Contains(r.stdout, `"id":3`) {
		t.Fatalf("leader with [killed, live]: %+v; want node 3 from the live endpoint", r)
	}
	if r := electctl(t, "--endpoints", eps, "status"); r.code != ExitOK {
		t.Fatalf("status with [killed, live]: %+v", r)
	}
	if r := electctl(t, "--endpoints", f.addr(1), "revive", "1"); r.code != ExitOK || !strings.Contains(r.stdout, "revived") {
		t.Fatalf("revive 1 through the killed node itself: %+v", r)
	}
	if r := electctl(t, "--endpoints", f.addr(1), "leader"); r.code != ExitOK {
		t.Fatalf("leader at node 1 after revive: %+v", r)
	}
}
