package engine

import (
	"context"
	"sync"
	"time"
)

// deadlineCtx is context.WithDeadline(parent, deadline) that makes its
// timer only when somebody waits on Done (or derives a context that must
// follow it). Most peer handlers never wait, and a timer per call was a
// tenth of the engine's CPU. The parent must have no earlier deadline.
type deadlineCtx struct {
	context.Context // the parent
	deadline        time.Time

	mu     sync.Mutex
	done   chan struct{} // made by the first Done
	err    error
	timer  *time.Timer
	stop   func() bool // stops following the parent
	afters []*afterFunc
}

type afterFunc struct {
	f       func()
	started bool
}

func newDeadlineCtx(parent context.Context, d time.Duration) *deadlineCtx {
	return &deadlineCtx{Context: parent, deadline: time.Now().Add(d)}
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked()
	return c.done
}

// armLocked makes done and, unless the context already ended, the timer
// and the parent's follower.
func (c *deadlineCtx) armLocked() {
	if c.done != nil {
		return
	}
	c.done = make(chan struct{})
	if c.err == nil {
		c.checkLocked()
	}
	if c.err != nil {
		c.endLocked()
		return
	}
	c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.cancel(context.DeadlineExceeded) })
	c.stop = context.AfterFunc(c.Context, func() { c.cancel(c.Context.Err()) })
}

// checkLocked sets err if the parent ended or the deadline passed.
func (c *deadlineCtx) checkLocked() {
	if err := c.Context.Err(); err != nil {
		c.err = err
	} else if !time.Now().Before(c.deadline) {
		c.err = context.DeadlineExceeded
	}
}

func (c *deadlineCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.checkLocked()
		if c.err != nil && c.done != nil {
			c.endLocked()
		}
	}
	return c.err
}

func (c *deadlineCtx) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		c.endLocked()
	}
}

// endLocked closes done (once; err is set) and runs the AfterFuncs.
func (c *deadlineCtx) endLocked() {
	select {
	case <-c.done:
		return
	default:
	}
	close(c.done)
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.stop != nil {
		c.stop()
	}
	for _, a := range c.afters {
		if !a.started {
			a.started = true
			go a.f()
		}
	}
	c.afters = nil
}

// AfterFunc lets context.WithCancel and friends follow this context
// without a goroutine each (the context package looks for this method).
func (c *deadlineCtx) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked()
	a := &afterFunc{f: f}
	if c.err != nil {
		a.started = true
		go f()
	} else {
		c.afters = append(c.afters, a)
	}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if a.started {
			return false
		}
		a.started = true
		return true
	}
}

// release ends the context when its call is over (like the cancel of
// context.WithDeadline) and stops its timer.
func (c *deadlineCtx) release() { c.cancel(context.Canceled) }
