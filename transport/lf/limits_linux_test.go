//go:build linux

package lf

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// closedWithin reports whether the server closes c within d, and what it
// sent first if it was a GOAWAY.
func closedWithin(t *testing.T, c net.Conn, d time.Duration) (closed bool, goaway *http2.ErrCode) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	fr := http2.NewFramer(nil, c)
	for {
		f, err := fr.ReadFrame()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return false, goaway
		}
		if err != nil {
			return true, goaway
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			code := ga.ErrCode
			goaway = &code
		}
	}
}

// TestHandshakeTimeout: a connection that sends nothing is closed after
// HandshakeTimeout; one that completed the handshake is not.
func TestHandshakeTimeout(t *testing.T) {
	ts := start(t, Config{Workers: 2, HandshakeTimeout: 200 * time.Millisecond}, nil)
	silent, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	good := dialH2(t, ts.addr)
	began := time.Now()
	if closed, _ := closedWithin(t, silent, 3*time.Second); !closed {
		t.Fatal("a silent connection outlived the handshake timeout")
	}
	if d := time.Since(began); d < 150*time.Millisecond {
		t.Fatalf("closed after %v, before the timeout", d)
	}
	if closed, _ := closedWithin(t, good.c, 500*time.Millisecond); closed {
		t.Fatal("a connection that completed the handshake was closed")
	}
	if st := ts.Stats(); st.HandshakeTimeouts != 1 {
		t.Fatalf("HandshakeTimeouts %d, want 1", st.HandshakeTimeouts)
	}
}

// TestIdleTimeout: a connection without streams or frames gets GOAWAY
// (NO_ERROR) and is closed after one to two IdleTimeouts; one that keeps
// calling is not.
func TestIdleTimeout(t *testing.T) {
	ts := start(t, Config{Workers: 2, IdleTimeout: 300 * time.Millisecond}, nil)
	idle := dialH2(t, ts.addr)
	busy := dialH2(t, ts.addr)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for id := uint32(1); ; id += 2 {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			busy.call(id, methodEcho, echoMsg(1))
			busy.flush()
		}
	}()
	go func() { _, _ = io.Copy(io.Discard, busy.c) }()
	closed, goaway := closedWithin(t, idle.c, 3*time.Second)
	close(stop)
	<-done
	if !closed || goaway == nil || *goaway != http2.ErrCodeNo {
		t.Fatalf("idle connection: closed %v, GOAWAY %v; want closed after GOAWAY(NO_ERROR)", closed, goaway)
	}
	// The client sees the close (the descriptor's) a moment before the
	// pool counts the connection gone.
	deadline := time.Now().Add(5 * time.Second)
	for st := ts.Stats(); st.IdleCloses != 1 || st.Conns != 1; st = ts.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("IdleCloses %d, Conns %d; want 1 and 1 (the busy one)", st.IdleCloses, st.Conns)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestMaxConns: connections beyond MaxConns are closed at once.
func TestMaxConns(t *testing.T) {
	ts := start(t, Config{Workers: 2, MaxConns: 2}, nil)
	dialH2(t, ts.addr)
	dialH2(t, ts.addr)
	extra, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if closed, _ := closedWithin(t, extra, 3*time.Second); !closed {
		t.Fatal("a third connection was served with MaxConns 2")
	}
	if st := ts.Stats(); st.RefusedConns != 1 || st.Conns != 2 {
		t.Fatalf("RefusedConns %d, Conns %d; want 1 and 2", st.RefusedConns, st.Conns)
	}
}
