package kinds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/electord/electord/transport/lf/lftest/echo"
)

// eventually is how long a test waits for something that should happen
// promptly; it only bounds a failing test, a passing one never waits it out.
const eventually = 10 * time.Second

// forKinds runs f as a subtest for every server kind. Kinds whose package is
// not built are skipped inside start.
func forKinds(t *testing.T, f func(t *testing.T, kind string)) {
	t.Helper()
	for _, kind := range Kinds {
		t.Run(kind, func(t *testing.T) { f(t, kind) })
	}
}

// server is a running server under test.
type server struct {
	kind string
	addr string
	srv  Server
	echo *echo.Server
	// serveDone receives Serve's result once.
	serveDone chan error
}

// start runs a server of the kind with the Echo service, and stops it when
// the test ends (failing the test if Stop hangs).
func start(t *testing.T, kind string, opts Options) *server {
	t.Helper()
	s := &server{kind: kind, echo: new(echo.Server), serveDone: make(chan error, 1)}
	user := opts.ServeDone
	opts.ServeDone = func(err error) {
		s.serveDone <- err
		if user != nil {
			user(err)
		}
	}
	addr, srv, err := Start(kind, func(r grpc.ServiceRegistrar) { echo.RegisterServer(r, s.echo) }, opts)
	if errors.Is(err, ErrNotBuilt) {
		t.Skipf("%s: %v", kind, err)
	}
	if err != nil {
		t.Fatalf("Start(%s): %v", kind, err)
	}
	s.addr, s.srv = addr, srv
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop calls Stop and fails the test if it does not return promptly. It may
// be called more than once.
func (s *server) stop(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	go func() { s.srv.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(eventually):
		t.Errorf("%s: Stop did not return within %v", s.kind, eventually)
	}
}

// dialer counts the connections a ClientConn makes.
type dialer struct {
	dials atomic.Int32
	wrap  func(net.Conn) net.Conn
}

func (d *dialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	d.dials.Add(1)
	if d.wrap != nil {
		c = d.wrap(c)
	}
	return c, nil
}

// sleeping starts a Sleep of d on cc under ctx and returns, once its
// handler runs, the channel that gets the call's result.
func (s *server) sleeping(t *testing.T, ctx context.Context, cc *grpc.ClientConn, d time.Duration) <-chan error {
	t.Helper()
	res := make(chan error, 1)
	go func() { res <- cc.Invoke(ctx, echo.MethodSleep, durationpb.New(d), new(emptypb.Empty)) }()
	waitFor(t, eventually, "the Sleep call to reach its handler", func() bool { return s.echo.Sleeping() == 1 })
	return res
}

// served waits for Serve's result, which must be nil after the stop
// (GracefulStop or Stop) that how names.
func (s *server) served(t *testing.T, how string) {
	t.Helper()
	select {
	case err := <-s.serveDone:
		// *grpc.Server.Serve returns nil after GracefulStop and Stop.
		if err != nil {
			t.Errorf("Serve returned %v after %s, want nil", err, how)
		}
	case <-time.After(eventually):
		t.Errorf("Serve did not return after %s", how)
	}
}

// ranHandlers fails the test unless the client connected once
// (connectedOnce) and the server ran n handlers (which says which).
func (s *server) ranHandlers(t *testing.T, d *dialer, n int64, which string) {
	t.Helper()
	d.connectedOnce(t)
	if got := s.echo.Calls(); got != n {
		t.Errorf("server ran %d handlers, want %d (%s)", got, n, which)
	}
}

// connectedOnce fails the test if the client made more (or fewer) than
// the one connection: it must not have reconnected.
func (d *dialer) connectedOnce(t *testing.T) {
	t.Helper()
	if got := d.dials.Load(); got != 1 {
		t.Errorf("client connected %d times, want 1", got)
	}
}

// dial returns a stock grpc-go client of addr, closed when the test ends,
// and the dialer whose count tells whether it reconnected.
func dial(t *testing.T, addr string, opts ...grpc.DialOption) (*grpc.ClientConn, *dialer) {
	t.Helper()
	d := new(dialer)
	return dialWith(t, addr, d, opts...), d
}

func dialWith(t *testing.T, addr string, d *dialer, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(d.dial),
	}, opts...)
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// callCtx bounds one call of a test.
func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	t.Cleanup(cancel)
	return ctx
}

// echo calls Echo and checks that the reply is the request.
func echoCall(ctx context.Context, cc grpc.ClientConnInterface, payload []byte) error {
	out := new(wrapperspb.BytesValue)
	if err := cc.Invoke(ctx, echo.MethodEcho, wrapperspb.Bytes(payload), out); err != nil {
		return err
	}
	if !bytes.Equal(out.GetValue(), payload) {
		return &mismatchError{want: payload, got: out.GetValue()}
	}
	return nil
}

type mismatchError struct{ want, got []byte }

func (e *mismatchError) Error() string {
	i := 0
	for i < len(e.want) && i < len(e.got) && e.want[i] == e.got[i] {
		i++
	}
	return fmt.Sprintf("echo reply differs: sent %d bytes, got %d, first difference at byte %d", len(e.want), len(e.got), i)
}

// mustEcho fails the test unless an Echo call of n bytes works.
func mustEcho(t *testing.T, cc grpc.ClientConnInterface, n int) {
	t.Helper()
	if err := echoCall(callCtx(t), cc, pattern(n, 7)); err != nil {
		t.Fatalf("Echo(%d bytes): %v", n, err)
	}
}

// pattern returns n bytes that depend on seed and position, so a reply
// with shuffled, dropped or repeated chunks never compares equal.
func pattern(n int, seed uint32) []byte {
	b := make([]byte, n)
	x := seed*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openFDs counts this process's open file descriptors.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// resources is a snapshot of the process's goroutines and descriptors.
type resources struct{ goroutines, fds int }

func snapshot() resources { return resources{runtime.NumGoroutine(), openFDs()} }

// expectNoGrowth waits until goroutines and descriptors are back to at most
// base plus slack, and fails with a goroutine dump if they do not get there.
func expectNoGrowth(t *testing.T, base resources, slack int, what string) {
	t.Helper()
	deadline := time.Now().Add(eventually)
	for {
		now := snapshot()
		if now.goroutines <= base.goroutines+slack && (base.fds < 0 || now.fds <= base.fds+slack) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: goroutines %d -> %d, open fds %d -> %d (slack %d) after %v\n%s",
				what, base.goroutines, now.goroutines, base.fds, now.fds, slack, eventually, goroutineDump())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serverFrames matches stack frames of server code: the engine and its
// drivers, the goroutine Start runs Serve on, and grpc-go's server side.
var serverFrames = regexp.MustCompile(`electord/transport/lf(/(engine|perconn|hsha))?\.|kinds\.Start\.func|grpc\.\(\*Server\)|transport\.\(\*http2Server\)|transport\.NewServerTransport`)

// serverGoroutines returns the stacks of goroutines running server code.
func serverGoroutines() []string {
	var out []string
	for _, g := range strings.Split(goroutineDump(), "\n\n") {
		if serverFrames.MatchString(g) {
			out = append(out, g)
		}
	}
	return out
}

func goroutineDump() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// rawDial opens a plain TCP connection, closed when the test ends.
func rawDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, eventually)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// h2Start writes the client preface and an empty SETTINGS frame and returns
// a Framer on c.
func h2Start(t *testing.T, c net.Conn) *http2.Framer {
	t.Helper()
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatalf("write preface: %v", err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatalf("write SETTINGS: %v", err)
	}
	return fr
}

// expectClosed reads and discards until the server closes c, and fails if
// it has not within the deadline.
func expectClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	// A server closes a broken connection at once; 5 s is for a loaded
	// machine.
	const wait = 5 * time.Second
	c.SetReadDeadline(time.Now().Add(wait))
	n, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: server kept the connection open for %v (read %d bytes)", what, wait, n)
	}
	// EOF (io.Copy's nil) or a reset: closed either way.
}
