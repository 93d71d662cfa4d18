package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// A dropped connection is reset, not closed: the peer reads a reset, not
// an end of stream, so nothing its kernel still held unsent is delivered
// later. With a graceful close the read below returns io.EOF.
func TestAbortResetsTheConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	var r tcpConns
	c, err := r.dialer(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var srv net.Conn
	select {
	case srv = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted within 5s")
	}
	defer srv.Close()
	r.abort()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_ = srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = srv.Read(make([]byte, 1))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the peer read %v after the drop, want a reset (io.EOF would be a graceful close: %v)", err, errors.Is(err, io.EOF))
	}
	if len(r.conns) != 0 {
		t.Fatalf("%d connections still recorded after abort", len(r.conns))
	}
}
