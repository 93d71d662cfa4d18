//go:build linux

package lf

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/credentials"

	"github.com/electord/electord/internal/rawsys"
	"github.com/electord/electord/transport/lf/engine"
)

// TLS on the pool (Config.TLS). The pattern stays: one goroutine waits on
// the epoll set, promotes a standby goroutine, then handles the event inline.
//
//   - The handshake is the one blocking exchange, done once per connection
//     off the pool: the connection is accepted by the pool as always and
//     held (armed→held) by a short-lived goroutine that runs crypto/tls's
//     server handshake over a duplicate of the descriptor registered in Go's
//     poller, with the connection's handshake deadline. It then drops the
//     duplicate (leaving Go's poller), creates the Session with the verified
//     TLS state as its peer's AuthInfo, and releases the connection to the
//     pool like any holder. No goroutine is left per connection.
//   - After that the same tls.Conn is the record layer over tlsConn, an
//     event-fed connection: its Read makes one non-blocking read(2) of the
//     raw descriptor and reports "no data yet" as a temporary net.Error
//     (errNoData), which crypto/tls does not make sticky, keeping a partial
//     record for the next event; its Write only appends the ciphertext to
//     an output buffer that the holder writes out without blocking, as it
//     writes a plain Session's output (EPOLLOUT while some is left).
//   - Records crypto/tls has buffered but not yet returned do not make the
//     socket readable. When the holder stops before reading them all (the
//     read budget, or the bytes that came with the handshake), it sets
//     tlsConn.more and arms the descriptor for EPOLLOUT too, which is ready
//     at once: the next poller reads them.
type tlsConn struct {
	fd     int
	remote net.Addr
	hs     net.Conn // during the handshake only: a duplicate of fd in Go's poller
	tc     *tls.Conn

	drained bool // the last read(2) came up short: nothing more until the next event
	more    bool // tc may hold records the socket will not announce

	out    []byte // ciphertext for the socket, borrowed from tlsOutBufs
	outp   *[]byte
	outOff int
}

// tlsOutBufs lends output buffers to busy connections: an idle one holds
// none (release), a busy one does not allocate one per event.
var tlsOutBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledTLSOut is the largest output buffer worth keeping for reuse.
const maxPooledTLSOut = 64 << 10

// errNoData is what tlsConn.Read says when the socket has nothing yet.
var errNoData error = noData{}

type noData struct{}

func (noData) Error() string   { return "lf: no TLS data yet" }
func (noData) Timeout() bool   { return false }
func (noData) Temporary() bool { return true }

// newTLSConn prepares the handshake of the pool's descriptor fd.
func newTLSConn(fd int, remote net.Addr) (*tlsConn, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "lf-tls-handshake")
	nc, err := net.FileConn(f) // its own duplicate, in Go's poller
	f.Close()
	if err != nil {
		return nil, err
	}
	return &tlsConn{fd: fd, remote: remote, hs: nc}, nil
}

// endHandshake leaves Go's poller: from now on the pool feeds tc.
func (t *tlsConn) endHandshake() {
	_ = t.hs.Close()
	t.hs = nil
}

// Read implements net.Conn for tls.Conn: blocking during the handshake,
// then one non-blocking read of the socket.
func (t *tlsConn) Read(p []byte) (int, error) {
	if t.hs != nil {
		return t.hs.Read(p)
	}
	if t.drained {
		return 0, errNoData
	}
	for {
		n, err := rawsys.Read(t.fd, p)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			t.drained = true
			return 0, errNoData
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		if n < len(p) {
			t.drained = true
		}
		return n, nil
	}
}

// Write implements net.Conn for tls.Conn: during the handshake it writes
// to the socket; afterwards it only queues (it never fails or blocks).
func (t *tlsConn) Write(p []byte) (int, error) {
	if t.hs != nil {
		return t.hs.Write(p)
	}
	if t.outp == nil {
		t.outp = tlsOutBufs.Get().(*[]byte)
		t.out = (*t.outp)[:0]
	}
	t.out = append(t.out, p...)
	return len(p), nil
}

// Close implements net.Conn: it ends only the handshake's duplicate (the
// pool owns the descriptor).
func (t *tlsConn) Close() error {
	if t.hs != nil {
		return t.hs.Close()
	}
	return nil
}

func (t *tlsConn) LocalAddr() net.Addr  { return nil }
func (t *tlsConn) RemoteAddr() net.Addr { return t.remote }

func (t *tlsConn) SetDeadline(d time.Time) error {
	if t.hs != nil {
		return t.hs.SetDeadline(d)
	}
	return nil
}

func (t *tlsConn) SetReadDeadline(d time.Time) error {
	if t.hs != nil {
		return t.hs.SetReadDeadline(d)
	}
	return nil
}

func (t *tlsConn) SetWriteDeadline(d time.Time) error {
	if t.hs != nil {
		return t.hs.SetWriteDeadline(d)
	}
	return nil
}

// Output and Wrote make t a rawsys.Out: the ciphertext to write.
func (t *tlsConn) Output() []byte { return t.out[t.outOff:] }

func (t *tlsConn) Wrote(n int) {
	t.outOff += n
	if t.outOff >= len(t.out) {
		t.out, t.outOff = t.out[:0], 0
	}
}

// flush encrypts the Session's output and writes out what the socket takes.
func (t *tlsConn) flush(sess *engine.Session) error {
	if out := sess.Output(); len(out) > 0 {
		n, err := t.tc.Write(out)
		sess.Wrote(n)
		if err != nil {
			return err
		}
	}
	_, err := rawsys.Flush(t.fd, t)
	return err
}

// release gives the output buffer of an idle connection back.
func (t *tlsConn) release() {
	if len(t.Output()) > 0 || t.outp == nil {
		return
	}
	if cap(t.out) <= maxPooledTLSOut {
		*t.outp = t.out[:0]
		tlsOutBufs.Put(t.outp)
	}
	t.out, t.outp, t.outOff = nil, nil, 0
}

// startTLS hands the new, held connection c to its handshake goroutine.
// Called by the listener's holder, a pool goroutine, so the Add precedes
// teardown's Wait.
func (s *Server) startTLS(c *handle, remote net.Addr) {
	s.handshakeWG.Add(1)
	go s.handshake(c, remote)
}

// handshake runs the TLS handshake of the held connection c, then either
// closes c or releases it to the pool with its Session.
func (s *Server) handshake(c *handle, remote net.Addr) {
	defer s.handshakeWG.Done()
	t, err := newTLSConn(c.fd, remote)
	if err == nil {
		// Registering and setting the deadline are one step under
		// handshakeMu. A stop sets s.stopping before abortHandshakes takes
		// the lock, so either it is seen here, or abortHandshakes finds t
		// registered and its past deadline comes after this one: the
		// handshake deadline never overwrites an abort.
		s.handshakeMu.Lock()
		if s.stopping.Load() {
			err = errStopped
		} else {
			s.handshakes[t] = struct{}{}
			_ = t.hs.SetDeadline(s.start.Add(time.Duration(c.since) + s.cfg.HandshakeTimeout))
		}
		s.handshakeMu.Unlock()
		if err == nil {
			s.probe.handshaking()
			t.tc = tls.Server(t, s.cfg.TLS)
			// No context: Stop, GracefulStop and a failing pool end the
			// handshake through its deadline (abortHandshakes), so nothing
			// else ever touches t while it runs.
			err = t.tc.Handshake()
			s.handshakeMu.Lock()
			delete(s.handshakes, t)
			s.handshakeMu.Unlock()
			if err != nil && s.cfg.TLSRefused != nil && !s.stopping.Load() {
				s.cfg.TLSRefused(remote, err)
			}
		}
		t.endHandshake()
	}
	s.runConn(c, func() bool {
		if err != nil {
			s.tlsErrors.Add(1)
			return true
		}
		s.tlsHandshakes.Add(1)
		c.tls, t.more = t, true // records may have come with the handshake
		c.sess = engine.NewSession(s.reg, s.cfg.Limits, remote)
		c.sess.SetAuthInfo(credentials.TLSInfo{State: t.tc.ConnectionState(),
			CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}})
		return s.flush(c) != nil
	})
}

// abortHandshakes ends every handshake in progress (the server is
// stopping; s.stopping is already set, so no new one registers). It gives
// each a deadline in the past; no later SetDeadline undoes that, because a
// handshake sets its own deadline when it registers, under the same lock.
func (s *Server) abortHandshakes() {
	s.handshakeMu.Lock()
	defer s.handshakeMu.Unlock()
	for t := range s.handshakes {
		_ = t.hs.SetDeadline(time.Unix(1, 0))
	}
	s.probe.aborted()
}

// readTLS reads and decrypts up to the read budget and feeds the Session.
func (s *Server) readTLS(c *handle, w *worker) (eof, closeNow bool) {
	t := c.tls
	t.drained, t.more = false, false
	for total := 0; total < s.cfg.ReadBudget; {
		buf := w.buf
		if rest := s.cfg.ReadBudget - total; rest < len(buf) {
			buf = buf[:rest]
		}
		n, err := t.tc.Read(buf)
		if n > 0 {
			total += n
			if s.feed(c, buf[:n]) {
				return false, true
			}
		}
		switch {
		case err == nil:
		case err == errNoData:
			return false, false
		case errors.Is(err, io.EOF):
			return true, false
		default:
			s.connErrs.Add(1)
			return false, true
		}
	}
	t.more = true // the budget is spent; tc may hold more
	return false, false
}
