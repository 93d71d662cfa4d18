package node

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
)

// sendSpy calls before with every message its node sends, before the
// message leaves, on the sender's loop goroutine. Network.SetHook is not
// enough here: it runs on a delivery goroutine after Send returned, when
// the sender may already have published what the test looks for.
type sendSpy struct {
	transport.Transport
	before func(election.Message)
}

func (s *sendSpy) Send(m election.Message) {
	s.before(m)
	s.Transport.Send(m)
}

// A leader whose app withdraws hands its named election over with a
// TimeoutNow; the successor may claim as soon as it reads it, so the
// leaving node must no longer show itself leading when that message
// leaves, or two nodes say they lead at once.
func TestNamedHandoverShowsTheWithdrawalFirst(t *testing.T) {
	for _, algo := range []string{"bully", "ring"} {
		t.Run(algo, func(t *testing.T) {
			var leaving atomic.Pointer[Node]
			var mu sync.Mutex
			var handovers, claimed int
			c := newClusterWith(t, algo, 2, func(id election.NodeID, tr transport.Transport) transport.Transport {
				if id != 1 {
					return tr
				}
				return &sendSpy{Transport: tr, before: func(m election.Message) {
					nd := leaving.Load()
					if nd == nil || m.Election != "jobs" || m.Type != election.MsgTimeoutNow {
						return
					}
					li, _ := nd.ElectionLeader("jobs")
					mu.Lock()
					handovers++
					if li.Self {
						claimed++
					}
					mu.Unlock()
				}}
			})
			leaving.Store(c.nodes[1])
			c.agree(10*time.Second, 0)
			ctx := context.Background()
			a, err := c.nodes[1].Campaign(ctx, "jobs", "a", 0)
			if err != nil {
				t.Fatal(err)
			}
			nextEvent(t, a, 10*time.Second, isEvent(EventLeader))
			b, err := c.nodes[2].Campaign(ctx, "jobs", "b", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			nextEvent(t, b, 10*time.Second, isEvent(EventFollower))
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			nextEvent(t, b, 10*time.Second, isEvent(EventLeader))
			mu.Lock()
			defer mu.Unlock()
			if handovers == 0 {
				t.Fatal("node 1 sent no TimeoutNow: the withdrawal did not hand over")
			}
			if claimed != 0 {
				t.Fatalf("node 1 still showed itself leading when %d of %d handovers left", claimed, handovers)
			}
		})
	}
}
