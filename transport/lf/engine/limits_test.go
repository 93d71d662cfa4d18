package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// attacker is a client that opens streams which claim a large message and
// send as much of it as the windows the Session grants allow, never
// ending them.
type attacker struct {
	t      *testing.T
	s      *Session
	enc    *hpack.Encoder
	hb     bytes.Buffer
	win    map[uint32]int64 // stream windows the Session granted
	conn   int64            // connection window the Session granted
	refs   map[uint32]http2.ErrCode
	status map[uint32]string // grpc-status of answered streams
	goaway http2.ErrCode
	gone   bool
}

func newAttacker(t *testing.T, s *Session) *attacker {
	a := &attacker{t: t, s: s, win: map[uint32]int64{}, conn: initialPeerWindow, refs: map[uint32]http2.ErrCode{}, status: map[uint32]string{}, goaway: 0xff}
	a.enc = hpack.NewEncoder(&a.hb)
	a.feed(clientStart())
	return a
}

// feed hands b to the Session and reads its answer.
func (a *attacker) feed(b []byte) error {
	err := a.s.Feed(b)
	fr := http2.NewFramer(nil, bytes.NewReader(a.s.Output()))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, ferr := fr.ReadFrame()
		if errors.Is(ferr, io.EOF) {
			break
		}
		if ferr != nil {
			a.t.Fatalf("unparsable output: %v", ferr)
		}
		switch f := f.(type) {
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				a.conn += int64(f.Increment)
			} else {
				a.win[f.StreamID] += int64(f.Increment)
			}
		case *http2.SettingsFrame:
			if v, ok := f.Value(http2.SettingInitialWindowSize); ok && !f.IsAck() {
				a.win[0] = int64(v) // the initial stream window
			}
		case *http2.RSTStreamFrame:
			a.refs[f.StreamID] = f.ErrCode
		case *http2.MetaHeadersFrame:
			if v := f.PseudoValue("status"); v != "" {
				for _, hf := range f.RegularFields() {
					if hf.Name == "grpc-status" {
						a.status[f.StreamID] = hf.Value
					}
				}
			}
		case *http2.GoAwayFrame:
			a.goaway = f.ErrCode
		}
	}
	a.s.Wrote(len(a.s.Output()))
	if err != nil {
		a.gone = true
	}
	return err
}

// open opens stream id claiming a message of size bytes.
func (a *attacker) open(id uint32, size int) {
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	a.hb.Reset()
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: "/enginetest.T/Echo"}, {Name: ":authority", Value: "x"}, {Name: "content-type", Value: "application/grpc"}} {
		_ = a.enc.WriteField(f)
	}
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: a.hb.Bytes(), EndHeaders: true})
	var prefix [5]byte
	binary.BigEndian.PutUint32(prefix[1:], uint32(size))
	_ = fr.WriteData(id, false, prefix[:])
	a.win[id] += a.win[0] - 5
	a.conn -= 5
	_ = a.feed(b.Bytes())
}

// send sends up to n bytes on stream id, as the windows allow, and
// returns how many it sent.
func (a *attacker) send(id uint32, n int) int {
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	sent := 0
	for sent < n {
		k := int(min(int64(n-sent), 16384, a.win[id], a.conn))
		if k <= 0 {
			break
		}
		_ = fr.WriteData(id, false, make([]byte, k))
		a.win[id] -= int64(k)
		a.conn -= int64(k)
		sent += k
	}
	if sent > 0 {
		_ = a.feed(b.Bytes())
	}
	return sent
}

// TestWindowsBoundMemory: the attack on one Session (600 streams,
// each claiming a 1 MiB message and sending 1 MiB - 1 as the windows
// allow). What the Session buffers stays within ConnBufferBytes; streams
// beyond MaxConcurrentStreams are refused.
func TestWindowsBoundMemory(t *testing.T) {
	lim := configured(Limits{MaxRecvMsgBytes: 1 << 20, Shared: NewBudget(64 << 20)})
	s := NewSession(fuzzRegistry(), lim, nil)
	a := newAttacker(t, s)
	full := NewSession(fuzzRegistry(), lim, nil).lim
	const msg = 1 << 20
	sent := map[uint32]int{}
	for i := range 600 {
		id := uint32(2*i + 1)
		a.open(id, msg)
		sent[id] = a.send(id, msg-1-5)
	}
	// Send what later grants allow, until nothing moves.
	for moved := true; moved && !a.gone; {
		moved = false
		for id := range sent {
			n := a.send(id, msg-1-5-sent[id])
			sent[id] += n
			moved = moved || n > 0
		}
	}
	if a.gone {
		t.Fatalf("the connection failed (GOAWAY %v) though the client kept to its windows", a.goaway)
	}
	refused := 0
	for _, code := range a.refs {
		if code == http2.ErrCodeRefusedStream {
			refused++
		}
	}
	if refused != 600-int(full.MaxConcurrentStreams) {
		t.Errorf("%d streams refused, want %d", refused, 600-int(full.MaxConcurrentStreams))
	}
	if b := s.Buffered(); b > int64(full.ConnBufferBytes) {
		t.Errorf("the Session holds %d bytes, over ConnBufferBytes %d", b, full.ConnBufferBytes)
	}
	if u := lim.Shared.Used(); u > int64(full.ConnBufferBytes) {
		t.Errorf("%d bytes allocated for bodies, over ConnBufferBytes %d", u, full.ConnBufferBytes)
	}
	t.Logf("buffered %d bytes (bound %d), allocated %d", s.Buffered(), full.ConnBufferBytes, lim.Shared.Used())
	// Every stream ends: the budgets are all given back.
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	for id := range sent {
		_ = fr.WriteRSTStream(id, http2.ErrCodeCancel)
	}
	_ = a.feed(b.Bytes())
	if s.Buffered() != 0 || lim.Shared.Used() != 0 {
		t.Errorf("after every stream was reset: %d buffered, %d allocated", s.Buffered(), lim.Shared.Used())
	}
}

// TestFlowControlErrors: DATA beyond a stream window resets the stream
// with FLOW_CONTROL_ERROR; beyond the connection window it ends the
// connection with GOAWAY(FLOW_CONTROL_ERROR).
func TestFlowControlErrors(t *testing.T) {
	a := newAttacker(t, NewSession(fuzzRegistry(), configured(Limits{}), nil))
	a.open(1, 1<<20)
	a.win[1] = 1 << 30 // the client ignores its window
	a.send(1, 2<<20)
	if a.refs[1] != http2.ErrCodeFlowControl || a.gone {
		t.Fatalf("stream window overrun: RST %v, connection gone %v", a.refs[1], a.gone)
	}

	a = newAttacker(t, NewSession(fuzzRegistry(), configured(Limits{ConnWindow: initialPeerWindow}), nil))
	a.conn = 1 << 30
	a.open(1, 60000)
	a.open(3, 60000)
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	for _, id := range []uint32{1, 3} {
		for range 2 {
			_ = fr.WriteData(id, false, make([]byte, 16384))
		}
	}
	if err := a.feed(b.Bytes()); err == nil || a.goaway != http2.ErrCodeFlowControl {
		t.Fatalf("connection window overrun: Feed %v, GOAWAY %v", err, a.goaway)
	}
}

// TestSharedBudget: streams of two connections that share a Budget; the
// one that would go beyond it ends with ResourceExhausted, and the budget
// comes back when streams end.
func TestSharedBudget(t *testing.T) {
	shared := NewBudget(300 << 10)
	lim := configured(Limits{Shared: shared})
	a := newAttacker(t, NewSession(fuzzRegistry(), lim, nil))
	b := newAttacker(t, NewSession(fuzzRegistry(), lim, nil))
	a.open(1, 200<<10)
	a.send(1, 200<<10)
	b.open(1, 200<<10)
	b.send(1, 200<<10)
	if got := b.status[1]; got != "8" { // ResourceExhausted
		t.Fatalf("second stream: grpc-status %q, want 8 (ResourceExhausted); budget used %d", got, shared.Used())
	}
	if shared.Used() > 300<<10 {
		t.Fatalf("budget over its size: %d", shared.Used())
	}
	var buf bytes.Buffer
	_ = http2.NewFramer(&buf, nil).WriteRSTStream(1, http2.ErrCodeCancel)
	_ = a.feed(buf.Bytes())
	if shared.Used() != 0 {
		t.Fatalf("budget after the streams ended: %d", shared.Used())
	}
}

// The configured limits have no default in the engine: zero ones are named.
func TestLimitsValidateNamesZeroFields(t *testing.T) {
	err := Limits{}.Validate()
	for _, want := range []string{"MaxRecvMsgBytes (max-message-bytes)", "MaxConcurrentStreams (peer-max-streams)", "MaxHeaderListBytes (max-header-list-bytes)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Limits{}.Validate() = %v, want it to name %s", err, want)
		}
	}
	if err := configured(Limits{}).Validate(); err != nil {
		t.Errorf("complete limits: %v", err)
	}
}
