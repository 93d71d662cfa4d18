package membership

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/electord/electord/election"
)

// TestForgedStartTimeDoesNotDisplaceASettledNode (issue 12, item 7): a
// hand-made node gossips the term slot of node 3 (id 65539), or node 3's
// very id, with a start time of 1, earlier than anyone's. Node 3 has been a
// member for longer than SettleWindow: it keeps its place and does not
// stand down, and the other member does not admit the newcomer.
func TestForgedStartTimeDoesNotDisplaceASettledNode(t *testing.T) {
	old := SettleWindow
	SettleWindow = 200 * time.Millisecond
	defer func() { SettleWindow = old }()
	for _, forged := range []election.NodeID{1<<election.SlotBits + 3, 3} {
		t.Run(fmt.Sprint(forged), func(t *testing.T) {
			holder := start(t, 3, "holder")
			other := start(t, 1, "other")
			other.join(holder.LocalAddr())
			holder.wait("join of 1", is(Join, 1), nil)
			other.wait("join of 3", is(Join, 3), nil)
			waitFor(t, "the holder settled in both views", func() bool {
				now := time.Now()
				holder.mu.Lock()
				settled := holder.settledLocked(now)
				holder.mu.Unlock()
				other.mu.Lock()
				defer other.mu.Unlock()
				mb := other.members["3"]
				return settled && mb != nil && mb.admitted && now.Sub(mb.seen) >= SettleWindow
			})

			mc := memberlist.DefaultLocalConfig()
			mc.Name, mc.BindAddr, mc.BindPort = fmt.Sprint(forged), "127.0.0.1", 0
			mc.Delegate = rawDelegate{[]byte(fmt.Sprintf(
				`{"id":%d,"name":"forger","priority":0,"peer":"127.0.0.1:1","api":"127.0.0.1:2","http":"127.0.0.1:3","since":1,"settings":{"algorithm":"","quorum":0,"preempt":false}}`,
				forged))}
			mc.LogOutput, mc.Logger = nil, memberlistLogger(slog.New(slog.DiscardHandler))
			raw, err := memberlist.Create(mc)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = raw.Shutdown() })
			_, _ = raw.Join([]string{other.LocalAddr(), holder.LocalAddr()})

			// The other member sees the claim and refuses the newcomer.
			other.wait("conflict about the forger", func(ev Event) bool { return ev.Type == Conflict }, about(forged, Join))
			// The holder never stands down, nor leaves the other's view.
			deadline := time.Now().Add(4 * SettleWindow)
			for time.Now().Before(deadline) {
				select {
				case ev := <-holder.Events():
					if ev.Yield {
						t.Fatalf("the settled holder stands down: %+v", ev)
					}
				case ev := <-other.Events():
					if (ev.Type == Join && ev.Member.ID == forged && forged != 3) || ((ev.Type == Dead || ev.Type == Leave) && ev.Member.ID == 3) {
						t.Fatalf("the other member: %+v", ev)
					}
				case <-time.After(10 * time.Millisecond):
				}
			}
			if got := ids(other.Members()); !slices.Equal(got, []election.NodeID{1, 3}) {
				t.Errorf("the other member's members: %v, want [1 3]", got)
			}
			for _, m := range other.Members() {
				if m.ID == 3 && m.Name != "holder" {
					t.Errorf("the other member lists id 3 as %+v, not the holder", m)
				}
			}
		})
	}
}
