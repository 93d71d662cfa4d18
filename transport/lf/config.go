package lf

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/electord/electord/transport/lf/engine"
)

// ErrUnsupported is returned by New where the pool cannot run (every
// platform but Linux), so callers can fall back to another transport.
var ErrUnsupported = errors.New("lf: the Leader/Followers pool needs Linux epoll")

// ErrServerStopped is returned by Serve when it is called after Stop or
// GracefulStop, or a second time.
var ErrServerStopped = errors.New("lf: the server was stopped")

const (
	// DefaultReadBudget is the ReadBudget when none is given (it is no
	// config key): a busy connection gets 256 KiB a turn, so it makes
	// progress without starving the others.
	DefaultReadBudget = 256 << 10
	// MinWorkers is the smallest pool: one goroutine polls while another
	// handles an event.
	MinWorkers = 2
)

// Config tunes a Server. The fields that are configuration (peer-workers,
// max-conns, handshake-timeout, idle-timeout, peer-max-buffered-bytes and
// the Limits) are required: New names the one missing; config.Default has
// their values. The comparison variants of the pool (FIFO promotion,
// LockOSThread, a blocking wait, more events per wait) are not settings:
// NewVariant builds them, in a build with the lfvariant tag
// (variant_on.go), for peerbench and the tests.
type Config struct {
	// Workers is the pool size (peer-workers, resolved by
	// config.Config.PeerWorkerCount). Values below MinWorkers are raised to
	// MinWorkers.
	Workers int
	// Limits bound what one connection may ask (see engine.Limits).
	Limits engine.Limits
	// ReadBudget is the most bytes read from one connection per event
	// before it is re-armed and other connections get their turn; 0 means
	// DefaultReadBudget.
	ReadBudget int

	// MaxConns is the most connections open at once; a connection accepted
	// beyond it is closed at once.
	MaxConns int
	// HandshakeTimeout closes a connection that has not sent the HTTP/2
	// client preface and its first SETTINGS frame within it after it was
	// accepted.
	HandshakeTimeout time.Duration
	// IdleTimeout sends GOAWAY to a connection that has had no open stream
	// and sent no frame for it, and closes it. The pool checks at most once
	// per IdleTimeout/8 (between 10 ms and 1 s), so a connection goes
	// after between 1 and 2 IdleTimeouts of silence. Negative means never.
	IdleTimeout time.Duration
	// MaxBufferedBytes bounds the request bytes that all connections
	// together may hold (engine.Limits.Shared): a call whose data would go
	// beyond it ends with ResourceExhausted. Ignored (and not required)
	// when Limits.Shared is set.
	MaxBufferedBytes int64

	// TLS, if not nil, serves TLS with it (the peer port uses
	// peerauth.ServerConfig: TLS 1.3, verified client certificates). ALPN
	// "h2" is added to NextProtos if missing, as grpc-go's clients require
	// it. The handshake runs once per connection off the pool (see
	// tls_linux.go) within HandshakeTimeout; handlers find the verified
	// state as credentials.TLSInfo in peer.FromContext(ctx).AuthInfo, as on
	// a grpc-go server. nil: plain HTTP/2.
	TLS *tls.Config
	// TLSRefused, if set, is told of every TLS handshake that failed, with
	// the client's address and crypto/tls's error (a handshake ended
	// because the server stops is not reported). It runs on the
	// handshake's own goroutine, off the pool.
	TLSRefused func(remote net.Addr, err error)
}

// checked returns c ready to serve, or an error naming every required
// field that is missing or out of range. It raises Workers to MinWorkers
// and sets a zero ReadBudget (no config key) to DefaultReadBudget.
func (c Config) checked() (Config, error) {
	var errs []error
	for _, f := range []struct {
		field, key string
		v          int64
	}{
		{"Workers", "peer-workers", int64(c.Workers)},
		{"MaxConns", "max-conns", int64(c.MaxConns)},
		{"HandshakeTimeout", "handshake-timeout", int64(c.HandshakeTimeout)},
	} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("lf: Config.%s (%s) must be positive, got %d", f.field, f.key, f.v))
		}
	}
	if c.IdleTimeout == 0 {
		errs = append(errs, errors.New("lf: Config.IdleTimeout (idle-timeout) must be set (negative: never)"))
	}
	if c.Limits.Shared == nil && c.MaxBufferedBytes <= 0 {
		errs = append(errs, fmt.Errorf("lf: Config.MaxBufferedBytes (peer-max-buffered-bytes) must be positive, got %d", c.MaxBufferedBytes))
	}
	if c.ReadBudget < 0 {
		errs = append(errs, errors.New("lf: negative ReadBudget"))
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return c, errors.Join(errs...)
	}
	c.Workers = max(c.Workers, MinWorkers)
	if c.ReadBudget == 0 {
		c.ReadBudget = DefaultReadBudget
	}
	if c.TLS != nil && !slices.Contains(c.TLS.NextProtos, "h2") {
		c.TLS = c.TLS.Clone()
		c.TLS.NextProtos = append(c.TLS.NextProtos, "h2")
	}
	if c.Limits.Shared == nil {
		c.Limits.Shared = engine.NewBudget(c.MaxBufferedBytes)
	}
	return c, nil
}

// New returns a Server that serves the services registered on reg. Register
// every service before calling Serve. Off Linux it returns ErrUnsupported.
func New(reg *engine.Registry, cfg Config) (*Server, error) {
	return newServer(reg, cfg, variant{})
}

// Stats is a snapshot of the pool's gauges and counters.
type Stats struct {
	// Gauges: pool goroutines polling (the poller: 0 or 1), handling an
	// event, and on standby; Live is how many pool goroutines exist.
	Polling, Handling, Standby, Live int
	// Conns is the number of open connections.
	Conns int

	// Events counts events returned by epoll (one per poll);
	// Stale counts those that were ignored because the handle was gone,
	// reused or already owned.
	Events, Stale uint64
	// Promotions counts standby goroutines woken to poll; NoStandby counts
	// the times a poller gave up polling while no goroutine was on standby
	// (the pool was saturated).
	Promotions, NoStandby uint64
	// Accepts counts accepted connections; RefusedConns those closed at
	// once because MaxConns were open.
	Accepts, RefusedConns uint64
	// HandshakeTimeouts counts connections closed for not completing the
	// HTTP/2 handshake in time; IdleCloses those closed for being idle.
	HandshakeTimeouts, IdleCloses uint64
	// TLSHandshakes counts completed TLS handshakes (Config.TLS);
	// TLSErrors the connections closed because theirs failed or ran out
	// of time (a client without a valid certificate, for one).
	TLSHandshakes, TLSErrors uint64
	// Buffered is the request bytes all connections hold now (see
	// Config.MaxBufferedBytes).
	Buffered int64
	// AcceptPauses counts the times accept failed for lack of descriptors
	// or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) and the listener was left
	// unarmed for a back-off (5 ms, doubling to 1 s) instead of spinning.
	AcceptPauses uint64
	// Calls counts calls run; HandlerErrors those whose handler returned
	// an error; HandlerPanics those whose handler panicked (the engine
	// turns them into Internal errors).
	Calls, HandlerErrors, HandlerPanics uint64
	// ConnErrors counts connections closed because of a read, write or
	// protocol error (Feed failing).
	ConnErrors uint64
	// Panics counts panics the pool recovered while handling a
	// connection; each closed that connection.
	Panics uint64
}
