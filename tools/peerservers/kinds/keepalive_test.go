package kinds

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/electord/electord/transport/lf/lftest/echo"
)

// pingCounter watches the frames on a client connection and counts the
// keepalive PINGs the client sends and the ACKs the server returns.
type pingCounter struct {
	sent   atomic.Int64 // PING frames from the client (not ACKs)
	acked  atomic.Int64 // PING ACK frames from the server
	ackSig chan struct{}
}

func newPingCounter() *pingCounter { return &pingCounter{ackSig: make(chan struct{}, 1)} }

func (p *pingCounter) wrap(c net.Conn) net.Conn {
	return &countingConn{Conn: c,
		out: frameScanner{skip: len(http2.ClientPreface), onFrame: func(typ, flags byte) {
			if typ == byte(http2.FramePing) && flags&byte(http2.FlagPingAck) == 0 {
				p.sent.Add(1)
			}
		}},
		in: frameScanner{onFrame: func(typ, flags byte) {
			if typ == byte(http2.FramePing) && flags&byte(http2.FlagPingAck) != 0 {
				p.acked.Add(1)
				select {
				case p.ackSig <- struct{}{}:
				default:
				}
			}
		}},
	}
}

type countingConn struct {
	net.Conn
	inMu, outMu sync.Mutex
	in, out     frameScanner
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.inMu.Lock()
	c.in.scan(b[:n])
	c.inMu.Unlock()
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.outMu.Lock()
	c.out.scan(b[:n])
	c.outMu.Unlock()
	return n, err
}

// frameScanner follows HTTP/2 frame boundaries in a byte stream.
type frameScanner struct {
	skip    int // bytes to ignore first (the client preface)
	hdr     []byte
	body    int // payload bytes of the current frame still to skip
	onFrame func(typ, flags byte)
}

func (s *frameScanner) scan(b []byte) {
	for len(b) > 0 {
		switch {
		case s.skip > 0:
			n := min(s.skip, len(b))
			s.skip -= n
			b = b[n:]
		case s.body > 0:
			n := min(s.body, len(b))
			s.body -= n
			b = b[n:]
		default:
			n := min(9-len(s.hdr), len(b))
			s.hdr = append(s.hdr, b[:n]...)
			b = b[n:]
			if len(s.hdr) == 9 {
				s.body = int(s.hdr[0])<<16 | int(s.hdr[1])<<8 | int(s.hdr[2])
				s.onFrame(s.hdr[3], s.hdr[4])
				s.hdr = s.hdr[:0]
			}
		}
	}
}

// keepaliveIdle is how long TestKeepalive keeps a connection idle: past the
// client's 10 s keepalive time, so at least one PING is sent and answered.
const keepaliveIdle = 12500 * time.Millisecond

// keepaliveRuns holds the outcome of each kind's keepalive run. TestMain
// starts the runs before the other tests, since they mostly wait: every
// kind at once, whatever -parallel is, so the idle costs ~12.5 s once. They
// only hold idle connections meanwhile, which the other tests' resource
// checks tolerate (those allow only a decrease of what existed before).
var keepaliveRuns map[string]chan keepaliveResult

type keepaliveResult struct {
	skip string
	err  error
}

func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() && runSelects("TestKeepalive") {
		keepaliveRuns = map[string]chan keepaliveResult{}
		for _, kind := range Kinds {
			ch := make(chan keepaliveResult, 1)
			keepaliveRuns[kind] = ch
			go func() { ch <- runKeepalive(kind) }()
		}
	}
	os.Exit(m.Run())
}

// runSelects reports whether -run (its top-level part) selects test.
func runSelects(test string) bool {
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	top, _, _ := strings.Cut(f.Value.String(), "/")
	re, err := regexp.Compile(top)
	return err != nil || re.MatchString(test)
}

// TestKeepalive idles a connection past the client's keepalive time and
// checks that the server answers the keepalive PINGs and the connection
// stays READY (and is the same connection) throughout.
func TestKeepalive(t *testing.T) {
	if keepaliveRuns == nil {
		t.Skip("keepalive runs take 12.5 s; not started in -short mode")
	}
	t.Parallel() // its runs are under way; collect them last
	for _, kind := range Kinds {
		t.Run(kind, func(t *testing.T) {
			select {
			case r := <-keepaliveRuns[kind]:
				if r.skip != "" {
					t.Skip(r.skip)
				}
				if r.err != nil {
					t.Error(r.err)
				}
			case <-time.After(keepaliveIdle + 3*eventually):
				t.Fatal("the keepalive run did not finish")
			}
		})
	}
}

func runKeepalive(kind string) (res keepaliveResult) {
	svc := new(echo.Server)
	addr, srv, err := Start(kind, func(r grpc.ServiceRegistrar) { echo.RegisterServer(r, svc) },
		Options{KeepaliveEnforcement: &keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}})
	if errors.Is(err, ErrNotBuilt) {
		return keepaliveResult{skip: err.Error()}
	}
	if err != nil {
		return keepaliveResult{err: err}
	}
	defer srv.Stop()
	pings := newPingCounter()
	d := &dialer{wrap: pings.wrap}
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(d.dial),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                10 * time.Second, // grpc-go's minimum
			Timeout:             time.Second,
			PermitWithoutStream: true,
		}),
		// A fixed window turns off grpc-go's BDP PINGs, so every PING the
		// client sends while idle is a keepalive.
		grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(1<<20))
	if err != nil {
		return keepaliveResult{err: err}
	}
	defer cc.Close()
	fail := func(format string, args ...any) keepaliveResult {
		return keepaliveResult{err: fmt.Errorf(format, args...)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), keepaliveIdle+2*eventually)
	defer cancel()
	if err := echo0(ctx, cc); err != nil {
		return fail("first call: %v", err)
	}
	if st := cc.GetState(); st != connectivity.Ready {
		return fail("state after a call is %v, want READY", st)
	}
	t0 := time.Now()
	sent0, acked0 := pings.sent.Load(), pings.acked.Load()
	changed := make(chan connectivity.State, 1)
	go func() {
		if cc.WaitForStateChange(ctx, connectivity.Ready) {
			changed <- cc.GetState()
		}
	}()
	left := func(st connectivity.State) keepaliveResult {
		return fail("connection went %v after %v idle (keepalive PINGs sent %d, acked %d)",
			st, time.Since(t0).Round(time.Millisecond), pings.sent.Load()-sent0, pings.acked.Load()-acked0)
	}

	// Idle until the server has acked a keepalive PING, then on to the end
	// of the idle period, watching the state throughout.
	ackBy := time.NewTimer(keepaliveIdle + 5*time.Second)
	defer ackBy.Stop()
	for pings.acked.Load() == acked0 {
		select {
		case st := <-changed:
			return left(st)
		case <-pings.ackSig:
		case <-ackBy.C:
			return fail("no PING ACK within %v (client sent %d keepalive PINGs)",
				time.Since(t0).Round(time.Millisecond), pings.sent.Load()-sent0)
		}
	}
	if rest := keepaliveIdle - time.Since(t0); rest > 0 {
		select {
		case st := <-changed:
			return left(st)
		case <-time.After(rest):
		}
	}
	if n := pings.sent.Load() - sent0; n < 1 {
		return fail("client sent %d keepalive PINGs while idle, want >= 1", n)
	}
	if st := cc.GetState(); st != connectivity.Ready {
		return fail("state after idling %v is %v, want READY", time.Since(t0).Round(time.Millisecond), st)
	}
	if err := echo0(ctx, cc); err != nil {
		return fail("call after idling: %v", err)
	}
	if n := d.dials.Load(); n != 1 {
		return fail("client connected %d times, want 1", n)
	}
	return keepaliveResult{}
}

// echo0 is one small Echo call.
func echo0(ctx context.Context, cc grpc.ClientConnInterface) error {
	return echoCall(ctx, cc, []byte("keepalive"))
}
