package node

import (
	"sync"
	"time"
)

// This file is what watchers (Subscribe) are told: the same leadership
// Leader answers, lease included. In quorum mode Leader checks the lease
// against the wall clock on every call, so a watcher told only of what the
// loop publishes could hold "self" for as long as the loop is paused or
// starved after the lease ran out. Instead, every event is Leader's answer
// at the moment it is published, and a timer at the lease's wall-clock end,
// which runs without the loop, publishes the lapse. The loop announces
// after it published a change and after it moved the lease, so a lease that
// starts is an event too, and never comes before the lease does.

// announcer serializes what subscribers are told. Its lock is taken before
// the hub's, by the loop and by the lapse timer's goroutine.
type announcer struct {
	mu sync.Mutex
	// last is the last view published (what Leader answered then).
	last LeaderInfo
	// timer (quorum mode) fires at the end of the lease that last was
	// published under; one per node, created on the first claim.
	timer *time.Timer
	// armed is the lease end (Unix ns, wall clock) the timer is set for;
	// 0 while it is stopped or has fired.
	armed int64
	// closed: the node stopped; the timer is stopped for good.
	closed bool
}

// announce publishes Leader's answer now if it differs from the last one
// published (sameView), and keeps the lapse timer at the end of the lease
// that answer claims under (stopped when it claims nothing).
func (n *Node) announce() {
	a := &n.ann
	a.mu.Lock()
	defer a.mu.Unlock()
	n.announceLocked()
}

func (n *Node) announceLocked() {
	a := &n.ann
	li, until := n.leaseView()
	if !sameView(li, a.last) {
		a.last = li
		n.hub.publish(li)
	}
	if until == a.armed || a.closed {
		return
	}
	a.armed = until
	if until == 0 {
		if a.timer != nil {
			a.timer.Stop()
		}
		return
	}
	// The lease's end is a wall-clock instant (leaseView compares it with
	// time.Now); a Time from time.Unix has no monotonic reading, so the
	// delay is measured on the wall clock too. If the wall clock is set
	// back meanwhile, the timer fires while the lease still holds: the
	// answer is then the same claim, and the timer is set again.
	d := time.Until(time.Unix(0, until))
	if a.timer == nil {
		a.timer = time.AfterFunc(d, n.leaseTimerFired)
		return
	}
	a.timer.Reset(d)
}

// sameView reports whether a and b mean the same to a watcher: who leads,
// in which term, and this node's state (an event is a change of these).
func sameView(a, b LeaderInfo) bool { return a.ID == b.ID && a.Term == b.Term && a.State == b.State }

// leaseTimerFired runs on the timer's own goroutine at the lease's end: it
// publishes the lapse without waiting for the loop, which may be paused or
// starved.
func (n *Node) leaseTimerFired() {
	a := &n.ann
	a.mu.Lock()
	defer a.mu.Unlock()
	a.armed = 0 // spent: a lease that still holds (a wall clock set back) arms it again
	n.announceLocked()
}

// subscribe registers a watcher under the announcer's lock, so its first
// event (Leader's answer) is not overtaken by an older view an announce
// computed before it and published after it.
func (n *Node) subscribe() *Subscription {
	a := &n.ann
	a.mu.Lock()
	defer a.mu.Unlock()
	return n.hub.add(n.Leader)
}

// stopAnnouncing stops the lapse timer for good; Run calls it as it ends.
func (n *Node) stopAnnouncing() {
	a := &n.ann
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	if a.timer != nil {
		a.timer.Stop()
	}
}
