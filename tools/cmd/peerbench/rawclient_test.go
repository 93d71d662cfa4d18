//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/electord/electord/tools/peerservers/kinds"

	"github.com/electord/electord/transport/lf/lftest/echo"
)

// The request header block must be valid stateless HPACK: a fresh decoder
// reads it, and leaves its dynamic table empty.
func TestRawRequestHeader(t *testing.T) {
	long := string(bytes.Repeat([]byte("a"), 300)) // a length past the 7-bit prefix
	req, err := newRawRequest(long, echoMethod, []byte("hi"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	d := hpack.NewDecoder(4096, nil)
	fields, err := d.DecodeFull(req.header)
	if err != nil {
		t.Fatal(err)
	}
	want := []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: echoMethod}, {Name: ":authority", Value: long},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
		{Name: "grpc-timeout", Value: "5S"},
	}
	if len(fields) != len(want) {
		t.Fatalf("decoded %d fields, want %d: %v", len(fields), len(want), fields)
	}
	for i := range want {
		if fields[i].Name != want[i].Name || fields[i].Value != want[i].Value {
			t.Errorf("field %d = %v, want %v", i, fields[i], want[i])
		}
	}
	// Decoding it again with the same decoder gives the same fields: no
	// state was carried over.
	if again, err := d.DecodeFull(req.header); err != nil || len(again) != len(want) {
		t.Fatalf("second decode: %v, %d fields", err, len(again))
	}
	if !bytes.Equal(req.msg[:5], []byte{0, 0, 0, 0, byte(len(req.msg) - 5)}) {
		t.Errorf("message prefix %x, length %d", req.msg[:5], len(req.msg))
	}
}

func TestGRPCTimeout(t *testing.T) {
	for d, want := range map[time.Duration]string{
		10 * time.Second:          "10S",
		5 * time.Minute:           "5M",
		1500 * time.Millisecond:   "1500m",
		time.Hour:                 "1H",
		1234567 * time.Nanosecond: "1234567n",
		time.Duration(1 << 62):    "1281023H",
	} {
		if got := grpcTimeout(d); got != want {
			t.Errorf("grpcTimeout(%v) = %q, want %q", d, got, want)
		}
	}
}

// A short closed-loop run against in-process servers: calls complete and
// none fails, for a small message and for one that needs several DATA
// frames and flow-control credit from the server.
func TestRawLoad(t *testing.T) { testRawLoad(t, kinds.Options{}) }

// TestRawLoadTLS is TestRawLoad with --tls's certificates on both sides.
func TestRawLoadTLS(t *testing.T) {
	dir, err := makeTLSDir()
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	defer func() { clientTLS = nil }()
	st, err := serverTLS(dir)
	if err != nil {
		t.Fatal(err)
	}
	testRawLoad(t, kinds.Options{TLS: st})
	// The grpc-go clients of the heartbeat and idle shapes.
	for _, kind := range []string{kinds.KindGRPC, kinds.KindLF} {
		addr, srv, err := kinds.Start(kind, echo.Register, kinds.Options{TLS: st})
		if err != nil {
			t.Fatal(err)
		}
		conns, err := dialN(context.Background(), addr, 20)
		if err != nil {
			t.Errorf("%s: %v", kind, err)
		}
		closeAll(conns)
		srv.Stop()
	}
	if _, _, err := kinds.Start(kinds.KindHSHA, echo.Register, kinds.Options{TLS: st}); !errors.Is(err, kinds.ErrNoTLS) {
		t.Errorf("hsha with TLS: %v, want ErrNoTLS", err)
	}
}

func testRawLoad(t *testing.T, opts kinds.Options) {
	for _, kind := range []string{kinds.KindGRPC, kinds.KindLF} {
		for _, size := range []int{64, 100 << 10} {
			addr, srv, err := kinds.Start(kind, echo.Register, opts)
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			var w window
			w.on.Store(true)
			payload := make([]byte, size)
			for i := range payload {
				payload[i] = byte(i)
			}
			l, err := startRawLoad(addr, 2, 9, payload, 10*time.Second, w.record)
			if err != nil {
				srv.Stop()
				t.Fatalf("%s/%d: %v", kind, size, err)
			}
			time.Sleep(300 * time.Millisecond)
			w.on.Store(false)
			lerr := l.stop()
			srv.Stop()
			calls, errs := w.calls.Load(), w.errs.Load()
			t.Logf("%s, %d B: %d calls, %d errors", kind, size, calls, errs)
			if lerr != nil {
				t.Errorf("%s/%d: connection: %v", kind, size, lerr)
			}
			if calls == 0 || errs != 0 {
				msg := ""
				if p := w.firstErr.Load(); p != nil {
					msg = *p
				}
				t.Errorf("%s/%d: %d calls, %d errors (%s)", kind, size, calls, errs, msg)
			}
		}
	}
}
