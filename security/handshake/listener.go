package handshake

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// NewListener serves TLS with cfg on l, as tls.NewListener does, except
// that the handshake is done before Accept returns the connection: Accept
// returns only connections whose handshake succeeded, as *tls.Conn (so an
// http.Server sees TLS as it does with tls.NewListener), and every refusal
// is recorded in r. net/http does the handshake itself and only prints
// its error to its ErrorLog; done here, the error keeps its type.
//
// Each handshake runs on a goroutine of its own, within timeout, so a slow
// client never holds up Accept; l bounds how many run at once (the
// sidecar's listener is capped at its max-conns).
func NewListener(l net.Listener, cfg *tls.Config, timeout time.Duration, r *Recorder) net.Listener {
	return &listener{Listener: l, cfg: cfg, timeout: timeout, r: r,
		ready: make(chan net.Conn), errc: make(chan error), done: make(chan struct{}), pending: map[net.Conn]struct{}{}}
}

type listener struct {
	net.Listener
	cfg     *tls.Config
	timeout time.Duration
	r       *Recorder

	ready chan net.Conn // handshaken connections
	errc  chan error    // accept errors, for Accept to return
	done  chan struct{} // closed by Close

	start, stop sync.Once

	mu      sync.Mutex
	closed  bool
	pending map[net.Conn]struct{} // connections in their handshake: Close ends them
}

func (l *listener) Accept() (net.Conn, error) {
	l.start.Do(func() { go l.acceptLoop() })
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errc:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// acceptLoop accepts raw connections and starts their handshakes. An
// accept error goes to the caller of Accept, which decides whether to go
// on (net/http backs off and retries a temporary one); only a closed
// listener ends the loop.
func (l *listener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			select {
			case l.errc <- err:
			case <-l.done:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go l.handshake(c)
	}
}

func (l *listener) handshake(c net.Conn) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		_ = c.Close()
		return
	}
	l.pending[c] = struct{}{}
	l.mu.Unlock()
	tc := tls.Server(c, l.cfg)
	_ = c.SetDeadline(time.Now().Add(l.timeout))
	err := tc.Handshake()
	if err == nil {
		err = c.SetDeadline(time.Time{})
	}
	l.mu.Lock()
	delete(l.pending, c)
	l.mu.Unlock()
	if err != nil {
		select {
		case <-l.done: // closed during the handshake: no refusal
		default:
			l.r.Refused(c.RemoteAddr(), err)
		}
		// As net/http answers a plaintext request on its TLS port.
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
			_, _ = io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
		}
		_ = tc.Close()
		return
	}
	select {
	case l.ready <- tc:
	case <-l.done:
		_ = tc.Close()
	}
}

// looksLikeHTTP: the first five bytes of a plaintext HTTP request.
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

// Close stops accepting and ends the handshakes in progress.
func (l *listener) Close() error {
	l.stop.Do(func() {
		close(l.done)
		l.mu.Lock()
		l.closed = true
		for c := range l.pending {
			_ = c.Close()
		}
		l.mu.Unlock()
	})
	return l.Listener.Close()
}
