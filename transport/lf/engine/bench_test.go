package engine

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// BenchmarkSessionCall is the engine's own cost per unary call, without
// sockets: batches of 16 requests (the headers a grpc-go client sends, with
// a grpc-timeout that differs per call as grpc-go's does, and a 64-byte
// message) fed at once, run, answered, and the output consumed. The input
// is encoded before the timer starts. The base context and the peer are
// those of the pool's calls; the handler decodes the request and returns
// it, and does not look at the metadata.
func BenchmarkSessionCall(b *testing.B) {
	const batch = 16
	msg, _ := proto.Marshal(wrapperspb.Bytes(make([]byte, 64)))
	body := append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	id := uint32(1)
	batches := make([][]byte, (b.N+batch-1)/batch)
	for i := range batches {
		var in bytes.Buffer
		fr := http2.NewFramer(&in, nil)
		// The client gives back the connection window the last batch's
		// answers used, as grpc-go does; without it the answers would
		// stall and the streams stay open until new ones are refused.
		_ = fr.WriteWindowUpdate(0, uint32(batch*(frameHeaderLen+len(body))))
		for range batch {
			hb.Reset()
			for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
				{Name: ":path", Value: "/enginetest.T/Plain"}, {Name: ":authority", Value: "127.0.0.1:4000"},
				{Name: "content-type", Value: "application/grpc"}, {Name: "user-agent", Value: "grpc-go/1.85.0"},
				{Name: "te", Value: "trailers"}, {Name: "grpc-timeout", Value: strconv.Itoa(4999000+int(id%1000)) + "u"}} {
				_ = enc.WriteField(f)
			}
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
			_ = fr.WriteData(id, true, body)
			id += 2
		}
		batches[i] = in.Bytes()
	}
	s := NewSession(fuzzRegistry(), configured(Limits{}), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4000})
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Feed(clientStart()); err != nil {
		b.Fatal(err)
	}
	s.Wrote(len(s.Output()))
	b.ReportAllocs()
	b.ResetTimer()
	for _, in := range batches {
		if err := s.Feed(in); err != nil {
			b.Fatal(err)
		}
		if n := s.Serve(base); n != batch || s.Open() != 0 {
			b.Fatalf("ran %d calls of %d; %d streams still open", n, batch, s.Open())
		}
		s.Wrote(len(s.Output()))
		s.Release()
	}
}
