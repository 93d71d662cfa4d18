package engine

import (
	"bytes"
	"context"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// BenchmarkSessionCall is the engine's own cost per unary call, without
// sockets: 16 requests (the headers a grpc-go client sends, a 64-byte
// message) fed at once, run, answered, and the output consumed.
func BenchmarkSessionCall(b *testing.B) {
	const batch = 16
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	msg, _ := proto.Marshal(wrapperspb.Bytes(make([]byte, 64)))
	body := append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...)
	s := NewSession(fuzzRegistry(), Limits{}, nil)
	if err := s.Feed(clientStart()); err != nil {
		b.Fatal(err)
	}
	s.Wrote(len(s.Output()))
	id := uint32(1)
	var in bytes.Buffer
	fr := http2.NewFramer(&in, nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		in.Reset()
		for range batch {
			hb.Reset()
			for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
				{Name: ":path", Value: "/enginetest.T/Echo"}, {Name: ":authority", Value: "127.0.0.1:4000"},
				{Name: "content-type", Value: "application/grpc"}, {Name: "user-agent", Value: "grpc-go/1.85.0"},
				{Name: "te", Value: "trailers"}, {Name: "grpc-timeout", Value: "4999871u"}} {
				_ = enc.WriteField(f)
			}
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
			_ = fr.WriteData(id, true, body)
			id += 2
		}
		if err := s.Feed(in.Bytes()); err != nil {
			b.Fatal(err)
		}
		s.Serve(context.Background())
		s.Wrote(len(s.Output()))
		s.Release()
	}
}
