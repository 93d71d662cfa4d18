package membership

import (
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/electord/electord/election"
)

// compressMsg is memberlist's message type of a compressed packet (its
// messageType enumeration is unexported: ping, indirectPing, ack, suspect,
// alive, dead, pushPull, compound, user, compress, ...).
const compressMsg = 9

// packetSpy counts the UDP packets a node sends and the TCP streams it
// opens (push/pull: a join), and those compressed.
type packetSpy struct {
	memberlist.NodeAwareTransport
	sent, compressed     atomic.Int64
	streams, compStreams atomic.Int64
}

// DialTimeout and DialAddressTimeout note whether a stream's first message
// is compressed.
func (s *packetSpy) DialTimeout(addr string, d time.Duration) (net.Conn, error) {
	c, err := s.NodeAwareTransport.DialTimeout(addr, d)
	return s.spyConn(c, err)
}

func (s *packetSpy) DialAddressTimeout(a memberlist.Address, d time.Duration) (net.Conn, error) {
	c, err := s.NodeAwareTransport.DialAddressTimeout(a, d)
	return s.spyConn(c, err)
}

func (s *packetSpy) spyConn(c net.Conn, err error) (net.Conn, error) {
	if err != nil {
		return nil, err
	}
	return &firstWrite{Conn: c, spy: s}, nil
}

type firstWrite struct {
	net.Conn
	spy  *packetSpy
	done bool
}

func (c *firstWrite) Write(b []byte) (int, error) {
	if !c.done && len(b) > 0 {
		c.done = true
		c.spy.streams.Add(1)
		if b[0] == compressMsg {
			c.spy.compStreams.Add(1)
		}
	}
	return c.Conn.Write(b)
}

func (s *packetSpy) count(b []byte) {
	s.sent.Add(1)
	if len(b) > 0 && b[0] == compressMsg {
		s.compressed.Add(1)
	}
}

func (s *packetSpy) WriteTo(b []byte, addr string) (time.Time, error) {
	s.count(b)
	return s.NodeAwareTransport.WriteTo(b, addr)
}

func (s *packetSpy) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	s.count(b)
	return s.NodeAwareTransport.WriteToAddress(b, a)
}

// spyOn starts node id behind a packetSpy; compress keeps compression on.
func spyOn(t *testing.T, id uint64, compress bool) (*testNode, *packetSpy) {
	t.Helper()
	spy := &packetSpy{}
	logs := &logSink{}
	cfg := Config{Self: metaFor(election.NodeID(id), "n"+strconv.FormatUint(id, 10)), BindAddr: "127.0.0.1:0", Preset: "local", Logger: slog.New(logs), compress: compress}
	cfg.wrapTransport = func(nt memberlist.NodeAwareTransport) memberlist.NodeAwareTransport {
		spy.NodeAwareTransport = nt
		return spy
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return &testNode{Membership: m, t: t, logs: logs}, spy
}

// TestGossipIsUncompressedAndUnderstandsCompressed: electord sends its
// gossip uncompressed (memberlist ran every packet, each probe and ack too,
// through a fresh LZW writer, and sent the result when it was smaller: about
// 8% of all CPU at 128 processes on 2 cores), and still understands a node
// that compresses (an older electord during a rolling upgrade): the new
// node's join (a push/pull stream) goes uncompressed and the old node's
// reply, compressed (memberlist compresses every stream when it is on), is
// understood; both see each other join, probe each other for a while
// without a suspicion, and the new node sees the old one leave.
func TestGossipIsUncompressedAndUnderstandsCompressed(t *testing.T) {
	old, oldSpy := spyOn(t, 1, true)
	cur, curSpy := spyOn(t, 2, false)
	cur.join(old.LocalAddr())
	old.wait("node 2 joining", is(Join, 2), nil)
	cur.wait("node 1 joining", is(Join, 1), nil)
	if n, c := curSpy.streams.Load(), curSpy.compStreams.Load(); n == 0 || c != 0 {
		t.Errorf("node 2 opened %d streams, %d compressed: want its join, uncompressed", n, c)
	}
	// Probes both ways (the local preset probes 5 times a second), and a
	// push/pull the other way (every second).
	end := time.Now().Add(deadline)
	for curSpy.sent.Load() < 10 || oldSpy.sent.Load() < 10 || oldSpy.compStreams.Load() == 0 {
		if time.Now().After(end) {
			t.Fatalf("within %v: node 2 sent %d packets, node 1 %d packets and %d compressed streams",
				deadline, curSpy.sent.Load(), oldSpy.sent.Load(), oldSpy.compStreams.Load())
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	if n := curSpy.compressed.Load(); n != 0 {
		t.Errorf("node 2 sent %d of %d packets compressed, want none", n, curSpy.sent.Load())
	}
	if err := old.Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	cur.wait("node 1 leaving", is(Leave, 1), is(Dead, 1))
	for _, ev := range cur.seen {
		if ev.Member.ID == 1 && ev.Type != Join && ev.Type != Leave {
			t.Errorf("node 2 saw %+v of node 1, want only its join and leave", ev)
		}
	}
}
