package node

import (
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/electord/electord/election"
)

// LeaderChange is one leadership change as this node saw it: what the
// "leadership changed" log line says, kept for the status page.
type LeaderChange struct {
	At     time.Time
	Leader election.NodeID // 0: no leader
	Term   election.Term   // the leadership's term (0 when none is known)
	Role   string          // this node's role after the change (StateLeader, ...)
	Cause  string          // what the loop was handling (see cause)
}

// TimelineSize is how many leader changes Timeline keeps.
const TimelineSize = 64

// timeline is the last TimelineSize changes. The loop appends, any
// goroutine reads.
type timeline = lastN[LeaderChange]

// timelines holds each node's timeline beside it, keyed weakly so that a
// node that is gone takes its timeline with it (a cleanup deletes the
// entry). Keeping it here leaves the Node struct and its loop as they are:
// recording is one call in logChange.
var timelines sync.Map // weak.Pointer[Node] -> *timeline

func (n *Node) timeline(create bool) *timeline {
	key := weak.Make(n)
	if t, ok := timelines.Load(key); ok || !create {
		t, _ := t.(*timeline)
		return t
	}
	t, loaded := timelines.LoadOrStore(key, &timeline{})
	if !loaded {
		runtime.AddCleanup(n, func(k weak.Pointer[Node]) { timelines.Delete(k) }, key)
	}
	return t.(*timeline)
}

// recordChange appends a leadership change to the timeline; called by the
// loop (logChange) only.
func (n *Node) recordChange(l election.Leadership, cause string) {
	n.timeline(true).add(LeaderChange{At: time.Now(), Leader: l.Leader, Term: l.Term, Role: roleState(l.Role), Cause: cause})
}

// Timeline is this node's last TimelineSize leadership changes, oldest
// first: when each happened, who led after it, in which term, this node's
// role and what caused it. Safe for concurrent use.
func (n *Node) Timeline() []LeaderChange {
	t := n.timeline(false)
	if t == nil {
		return []LeaderChange{}
	}
	return t.list()
}
