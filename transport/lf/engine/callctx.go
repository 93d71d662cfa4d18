package engine

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// callCtx is the context a handler gets: one object, made with its call,
// that is what a chain of context.WithDeadline (or WithCancel),
// NewIncomingContext, peer.NewContext and
// grpc.NewContextWithServerTransportStream would be, at the cost of none of
// their allocations. The metadata map is only made if the handler asks for
// it. The timer is only made if somebody waits on Done (or derives a
// context that must follow this one): most peer handlers never wait, and a
// timer per call was a tenth of the engine's CPU. It holds everything it
// answers for itself, so a handler may keep it past the call, as grpc-go
// allows, while the Call is reused.
//
// The context ends when its deadline passes, when the parent ends, when the
// call is aborted (a reset stream, where Session.CancelOnReset allows) and
// when the handler returns, as grpc-go's does.
type callCtx struct {
	parent   context.Context // set by start
	peer     *peer.Peer
	method   string
	hasDL    bool
	deadline time.Time

	mu     sync.Mutex
	call   *Call         // until the handler returns (for SetHeader)
	done   chan struct{} // made by the first Done
	err    error
	timer  *time.Timer
	stop   func() bool // stops following the parent
	afters []*afterFunc
	md     metadata.MD
	mdMade bool

	// The incoming metadata as fields (values decoded), made into md on
	// first use; grpc-go's clients send two (:authority, user-agent).
	mdf      []mdField
	mdInline [2]mdField
}

type mdField struct{ k, v string }

func newCallCtx(c *Call) *callCtx {
	return &callCtx{call: c, peer: c.peer, method: c.method}
}

// addMetadata keeps one field of the incoming metadata.
func (c *callCtx) addMetadata(k, v string) {
	if c.mdf == nil {
		c.mdf = c.mdInline[:0]
	}
	c.mdf = append(c.mdf, mdField{k, v})
}

// incomingMD returns the call's incoming metadata, made on first use.
// grpc-go keeps a key's repeated values in order, and so does this.
func (c *callCtx) incomingMD() metadata.MD {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mdMade {
		c.mdMade = true
		if len(c.mdf) > 0 {
			md := make(metadata.MD, len(c.mdf))
			for _, f := range c.mdf {
				md[f.k] = append(md[f.k], f.v)
			}
			c.md = md
		}
	}
	return c.md
}

type afterFunc struct {
	f       func()
	started bool
}

// ctxKeys are the keys grpc-go's own helpers look values up by. They are
// unexported in grpc-go, so they are learnt once by asking the helpers to
// read a context that records the keys it is asked for.
var ctxKeys = func() (k struct {
	md, peer, stream any
	ok               bool
}) {
	k.md = probeKey(func(ctx context.Context) { metadata.FromIncomingContext(ctx) })
	k.peer = probeKey(func(ctx context.Context) { peer.FromContext(ctx) })
	k.stream = probeKey(func(ctx context.Context) { grpc.ServerTransportStreamFromContext(ctx) })
	k.ok = k.md != nil && k.peer != nil && k.stream != nil &&
		k.md != k.peer && k.md != k.stream && k.peer != k.stream
	return k
}()

// keyProbe records the one key it is asked for.
type keyProbe struct {
	context.Context
	keys []any
}

func (p *keyProbe) Value(key any) any {
	p.keys = append(p.keys, key)
	return nil
}

// probeKey returns the key read looks up, or nil unless it looks up
// exactly one.
func probeKey(read func(context.Context)) any {
	p := &keyProbe{Context: context.Background()}
	read(p)
	if len(p.keys) != 1 {
		return nil
	}
	return p.keys[0]
}

// start makes c the context of its call under parent, with a deadline
// timeout after from (0: none) unless the parent ends first. A call aborted
// before it started stays ended.
func (c *callCtx) start(parent context.Context, from time.Time, timeout time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.parent = parent
	if timeout > 0 {
		dl := from.Add(timeout)
		if pdl, ok := parent.Deadline(); !ok || dl.Before(pdl) {
			c.hasDL, c.deadline = true, dl
		}
	}
}

func (c *callCtx) Deadline() (time.Time, bool) {
	if c.hasDL {
		return c.deadline, true
	}
	return c.parent.Deadline()
}

func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked()
	return c.done
}

func (c *callCtx) Err() error {
	c.mu.Lock()
	var run []*afterFunc
	if c.err == nil {
		c.checkLocked()
		if c.err != nil && c.done != nil {
			run = c.endLocked()
		}
	}
	err := c.err
	c.mu.Unlock()
	runAfters(run)
	return err
}

func (c *callCtx) Value(key any) any {
	switch key {
	case ctxKeys.md:
		return c.incomingMD()
	case ctxKeys.peer:
		if c.peer != nil {
			return c.peer
		}
	case ctxKeys.stream:
		return (*callStream)(c)
	}
	return c.parent.Value(key)
}

// armLocked makes done and, unless the context already ended, the timer
// and the parent's follower.
func (c *callCtx) armLocked() {
	if c.done != nil {
		return
	}
	c.done = make(chan struct{})
	if c.err == nil {
		c.checkLocked()
	}
	if c.err != nil {
		c.endLocked() // nothing registered yet: AfterFunc arms first
		return
	}
	if c.hasDL {
		c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.cancel(context.DeadlineExceeded) })
	}
	c.stop = context.AfterFunc(c.parent, func() { c.cancel(c.parent.Err()) })
}

// checkLocked sets err if the parent ended or the deadline passed.
func (c *callCtx) checkLocked() {
	if err := c.parent.Err(); err != nil {
		c.err = err
	} else if c.hasDL && !time.Now().Before(c.deadline) {
		c.err = context.DeadlineExceeded
	}
}

func (c *callCtx) cancel(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	var run []*afterFunc
	if c.done != nil {
		run = c.endLocked()
	}
	c.mu.Unlock()
	runAfters(run)
}

// endLocked closes done (once; err is set) and returns the AfterFuncs
// that are due, for the caller to run once it has let go of mu.
func (c *callCtx) endLocked() []*afterFunc {
	select {
	case <-c.done:
		return nil
	default:
	}
	close(c.done)
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.stop != nil {
		c.stop()
	}
	run := c.afters
	for _, a := range run {
		a.started = true
	}
	c.afters = nil
	return run
}

// runAfters runs the functions registered through AfterFunc, in order, on
// the goroutine that ended the context: they are the context package's
// cancellations of derived contexts (context.AfterFunc starts its own
// goroutine for the user's function), so a derived context has ended by
// the time cancel or end returns, as with context.WithCancel.
func runAfters(run []*afterFunc) {
	for _, a := range run {
		a.f()
	}
}

// AfterFunc lets context.WithCancel and friends follow this context
// without a goroutine each (the context package looks for this method).
func (c *callCtx) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	c.armLocked()
	a := &afterFunc{f: f}
	if c.err != nil {
		a.started = true
		c.mu.Unlock()
		f()
	} else {
		c.afters = append(c.afters, a)
		c.mu.Unlock()
	}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if a.started {
			return false
		}
		a.started = true
		// Forget it now: a handler that derives and cancels contexts in
		// a loop must not pile them up until the call ends.
		for i, b := range c.afters {
			if b == a {
				c.afters = append(c.afters[:i], c.afters[i+1:]...)
				break
			}
		}
		return true
	}
}

// end ends the context when its call is over, as grpc-go ends a stream's
// context, stops its timer and lets go of the Call.
func (c *callCtx) end() {
	c.cancel(context.Canceled)
	c.mu.Lock()
	c.call = nil
	c.mu.Unlock()
}
