// Package perconn drives the lf engine with the plainest concurrency model
// Go offers: one goroutine per accepted connection. That goroutine does a
// blocking Read, feeds the bytes to the connection's engine.Session, runs
// every assembled call inline (Session.Serve) and writes the Session's output
// back with a blocking Write, then reads again. The Go runtime's netpoller
// does the multiplexing behind the scenes.
//
// It exists as a control for the Leader/Followers pool in transport/lf: the
// protocol work (HTTP/2 framing, HPACK, gRPC framing, handler dispatch) is
// the very same engine, so any difference a benchmark shows between the two
// comes from how connections and calls are mapped onto goroutines, not from
// the protocol code. Because calls on one connection run one after another
// on that connection's goroutine, a slow handler holds up the calls
// multiplexed behind it on the same connection; that is a property of the
// model, kept on purpose.
//
// The Server mimics the lifecycle of *grpc.Server: Serve, GracefulStop,
// Stop.
package perconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/electord/electord/transport/lf/engine"
)

// ErrServerStopped is returned by Serve when it is called after Stop or
// GracefulStop.
var ErrServerStopped = errors.New("perconn: server stopped")

// readBufBytes is the size of each connection's read buffer.
const readBufBytes = 32 << 10

// Stats are the Server's counters.
type Stats struct {
	Accepted  uint64 // connections accepted
	Open      int64  // connections being served now
	Calls     uint64 // calls run (Session.Serve results)
	Reads     uint64 // successful Reads
	Writes    uint64 // successful Writes
	Panics    uint64 // panics recovered in a connection's goroutine
	FeedError uint64 // connections Feed ended (protocol errors, peer GOAWAY)
}

// Server serves gRPC calls from a Registry with a goroutine per connection.
type Server struct {
	reg *engine.Registry
	lim engine.Limits

	ctx    context.Context // base context of every call; canceled by Stop
	cancel context.CancelFunc

	mu        sync.Mutex
	lis       map[net.Listener]bool
	conns     map[*conn]bool
	draining  bool
	stopped   bool
	serveWG   sync.WaitGroup // Serve calls
	connWG    sync.WaitGroup // connection goroutines
	done      chan struct{}  // closed when a stop has completed
	closeOnce sync.Once

	accepted, calls, reads, writes, panics, feedErr atomic.Uint64
	open                                            atomic.Int64
}

// New returns a Server that runs the handlers of reg under the limits lim.
// Register every service on reg before calling Serve.
func New(reg *engine.Registry, lim engine.Limits) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		reg:    reg,
		lim:    lim,
		ctx:    ctx,
		cancel: cancel,
		lis:    map[net.Listener]bool{},
		conns:  map[*conn]bool{},
		done:   make(chan struct{}),
	}
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	return Stats{
		Accepted:  s.accepted.Load(),
		Open:      s.open.Load(),
		Calls:     s.calls.Load(),
		Reads:     s.reads.Load(),
		Writes:    s.writes.Load(),
		Panics:    s.panics.Load(),
		FeedError: s.feedErr.Load(),
	}
}

// Serve accepts connections on lis and serves each on its own goroutine
// until Stop or GracefulStop. lis is closed when Serve returns. Serve returns
// nil after a stop (once the stop has completed), ErrServerStopped when
// called after one, and the Accept error otherwise.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.stopped || s.draining {
		s.mu.Unlock()
		lis.Close()
		return ErrServerStopped
	}
	s.lis[lis] = true
	s.serveWG.Add(1)
	s.mu.Unlock()

	var backoff time.Duration
	for {
		nc, err := lis.Accept()
		if err != nil {
			var ne interface{ Temporary() bool }
			if !s.quitting() && errors.As(err, &ne) && ne.Temporary() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
				case <-s.ctx.Done():
					t.Stop()
				}
				continue
			}
			quit := s.quitting()
			s.mu.Lock()
			if s.lis[lis] {
				delete(s.lis, lis)
				lis.Close()
			}
			s.mu.Unlock()
			s.serveWG.Done()
			if quit {
				// Like grpc.Server.Serve, return only once the stop has
				// completed, so a caller waiting on Serve sees it all.
				<-s.done
				return nil
			}
			return err
		}
		backoff = 0
		s.accepted.Add(1)
		c := &conn{s: s, nc: nc}
		s.mu.Lock()
		if s.stopped || s.draining {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.conns[c] = true
		s.connWG.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

func (s *Server) quitting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped || s.draining
}

// GracefulStop stops accepting connections, sends GOAWAY on every
// connection, lets the calls already accepted finish, closes each connection
// once it is drained, and returns when every goroutine of the Server has
// exited.
func (s *Server) GracefulStop() {
	s.mu.Lock()
	if s.stopped || s.draining {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.draining = true
	s.closeListenersLocked()
	for c := range s.conns {
		c.startDrain()
	}
	s.mu.Unlock()

	s.serveWG.Wait()
	s.connWG.Wait()
	s.finish()
}

// Stop closes every listener and connection at once and cancels the context
// of running calls; it returns when every goroutine of the Server has
// exited, so handlers must honour context cancellation.
func (s *Server) Stop() {
	s.mu.Lock()
	wasStopped := s.stopped
	s.stopped = true
	s.closeListenersLocked()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.cancel()
	if wasStopped {
		<-s.done
		return
	}
	s.serveWG.Wait()
	s.connWG.Wait()
	s.finish()
}

func (s *Server) closeListenersLocked() {
	for l := range s.lis {
		l.Close()
		delete(s.lis, l)
	}
}

func (s *Server) finish() {
	s.closeOnce.Do(func() {
		s.cancel()
		close(s.done)
	})
}

// conn is one connection and the goroutine that owns its Session.
type conn struct {
	s  *Server
	nc net.Conn

	// mu orders a drain request against the goroutine's clearing of the read
	// deadline that delivered it.
	mu       sync.Mutex
	drain    bool // GracefulStop asked for GOAWAY
	drainAck bool // the goroutine has sent it
}

// startDrain asks the goroutine to send GOAWAY. It interrupts a blocked Read
// with a read deadline in the past; the goroutine clears the deadline when it
// acts on the request. Called with s.mu held.
func (c *conn) startDrain() {
	c.mu.Lock()
	c.drain = true
	c.nc.SetReadDeadline(time.Unix(1, 0))
	c.mu.Unlock()
}

// takeDrain reports whether a drain was requested and not yet acted on, and
// marks it acted on.
func (c *conn) takeDrain() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.drain || c.drainAck {
		return false
	}
	c.drainAck = true
	c.nc.SetReadDeadline(time.Time{})
	return true
}

func (c *conn) draining() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.drain
}

func (c *conn) serve() {
	s := c.s
	s.open.Add(1)
	defer func() {
		if r := recover(); r != nil {
			s.panics.Add(1)
		}
		c.nc.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.open.Add(-1)
		s.connWG.Done()
	}()

	sess := engine.NewSession(s.reg, s.lim, c.nc.RemoteAddr())
	defer sess.Release()
	if c.flush(sess) != nil {
		return
	}
	buf := make([]byte, readBufBytes)
	for {
		if c.takeDrain() {
			sess.GoAway()
			if c.flush(sess) != nil {
				return
			}
		}
		if sess.Done() {
			return // output is flushed: flush never leaves bytes behind
		}
		sess.Release()
		n, err := c.nc.Read(buf)
		if n > 0 {
			s.reads.Add(1)
			ferr := sess.Feed(buf[:n])
			if ferr != nil {
				s.feedErr.Add(1)
				c.flush(sess)
				return
			}
			if ran := sess.Serve(s.ctx); ran > 0 {
				s.calls.Add(uint64(ran))
			}
			if c.flush(sess) != nil {
				return
			}
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && c.draining() {
				continue // the drain request's wake-up; handled at the top
			}
			return
		}
	}
}

// flush writes all of the Session's output.
func (c *conn) flush(sess *engine.Session) error {
	for {
		out := sess.Output()
		if len(out) == 0 {
			return nil
		}
		n, err := c.nc.Write(out)
		if n > 0 {
			sess.Wrote(n)
			c.s.writes.Add(1)
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("perconn: short write with no error")
		}
	}
}
