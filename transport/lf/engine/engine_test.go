package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// testService: Echo echoes; Wait blocks until ctx ends; Fail fails with
// the request text as the message.
var testDesc = grpc.ServiceDesc{
	ServiceName: "enginetest.T",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Echo", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.BytesValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			if md, ok := metadata.FromIncomingContext(ctx); ok && len(md["x-echo"]) > 0 {
				_ = grpc.SetHeader(ctx, metadata.Pairs("x-echo", md["x-echo"][0]))
				_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trail-bin", md["x-echo"][0]))
			}
			return in, nil
		}},
		{MethodName: "Plain", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.BytesValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return in, nil
		}},
		{MethodName: "Wait", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.BytesValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			<-ctx.Done()
			return nil, ctx.Err()
		}},
		{MethodName: "Fail", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return nil, status.Error(codes.FailedPrecondition, in.Value)
		}},
	},
}

// serveConns is the simplest driver: a goroutine per connection.
// configured fills the configured limits a test leaves zero with the values the
// engine's tests were written for: a 4 MiB message (grpc-go's server
// default), 100 streams a connection and a 16 KiB header list.
func configured(lim Limits) Limits {
	if lim.MaxRecvMsgBytes == 0 {
		lim.MaxRecvMsgBytes = 4 << 20
	}
	if lim.MaxConcurrentStreams == 0 {
		lim.MaxConcurrentStreams = 100
	}
	if lim.MaxHeaderListBytes == 0 {
		lim.MaxHeaderListBytes = 16 << 10
	}
	return lim
}

func serveConns(t *testing.T, lim Limits) string {
	t.Helper()
	reg := NewRegistry()
	reg.RegisterService(&testDesc, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				stop := context.AfterFunc(ctx, func() { c.Close() })
				defer stop()
				s := NewSession(reg, lim, c.RemoteAddr())
				buf := make([]byte, 32<<10)
				for {
					if out := s.Output(); len(out) > 0 {
						if _, err := c.Write(out); err != nil {
							return
						}
						s.Wrote(len(out))
					}
					if s.Done() {
						return
					}
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					ferr := s.Feed(buf[:n])
					s.Serve(ctx)
					if ferr != nil {
						c.Write(s.Output())
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20), grpc.MaxCallSendMsgSize(16<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func TestEngineEchoSizes(t *testing.T) {
	cc := dial(t, serveConns(t, configured(Limits{MaxRecvMsgBytes: 8 << 20})))
	for _, n := range []int{0, 1, 64, 70 << 10, 1 << 20, 3 << 20} {
		in := wrapperspb.Bytes(bytes.Repeat([]byte{byte(n)}, n))
		out := new(wrapperspb.BytesValue)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := cc.Invoke(ctx, "/enginetest.T/Echo", in, out)
		cancel()
		if err != nil {
			t.Fatalf("echo %d bytes: %v", n, err)
		}
		if !bytes.Equal(in.Value, out.Value) {
			t.Fatalf("echo %d bytes: got %d bytes back", n, len(out.Value))
		}
	}
}

func TestEngineStatusAndMetadata(t *testing.T) {
	cc := dial(t, serveConns(t, configured(Limits{MaxRecvMsgBytes: 1 << 10})))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := cc.Invoke(ctx, "/enginetest.T/Fail", wrapperspb.String("nope: ünïcode 100%"), new(wrapperspb.StringValue))
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || st.Message() != "nope: ünïcode 100%" {
		t.Fatalf("Fail: got %v", err)
	}
	for _, m := range []string{"/enginetest.T/Nope", "/enginetest.X/Echo"} {
		if err := cc.Invoke(ctx, m, wrapperspb.Bytes(nil), new(wrapperspb.BytesValue)); status.Code(err) != codes.Unimplemented {
			t.Fatalf("%s: got %v, want Unimplemented", m, err)
		}
	}
	// An oversized request is refused with a text that names the key of the
	// limit and both sizes, for any client (this one is plain grpc-go).
	big := wrapperspb.Bytes(make([]byte, 2<<10))
	err = cc.Invoke(ctx, "/enginetest.T/Echo", big, new(wrapperspb.BytesValue))
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted ||
		st.Message() != fmt.Sprintf("message of %d bytes refused: the receiver's max-message-bytes is 1024", proto.Size(big)) {
		t.Fatalf("oversize: got %v", err)
	}
	var hdr, trl metadata.MD
	mctx := metadata.AppendToOutgoingContext(ctx, "x-echo", "hello")
	if err := cc.Invoke(mctx, "/enginetest.T/Echo", wrapperspb.Bytes([]byte("x")), new(wrapperspb.BytesValue), grpc.Header(&hdr), grpc.Trailer(&trl)); err != nil {
		t.Fatal(err)
	}
	if hdr.Get("x-echo")[0] != "hello" || trl.Get("x-trail-bin")[0] != "hello" {
		t.Fatalf("metadata: header %v trailer %v", hdr, trl)
	}
	dctx, dcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer dcancel()
	if err := cc.Invoke(dctx, "/enginetest.T/Wait", wrapperspb.Bytes(nil), new(wrapperspb.BytesValue)); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("deadline: got %v", err)
	}
	if err := cc.Invoke(ctx, "/enginetest.T/Echo", wrapperspb.Bytes([]byte("after")), new(wrapperspb.BytesValue)); err != nil {
		t.Fatalf("after deadline: %v", err)
	}
}

func TestEngineConcurrentCalls(t *testing.T) {
	cc := dial(t, serveConns(t, configured(Limits{})))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := wrapperspb.Bytes(bytes.Repeat([]byte{byte(i)}, 100+i*500))
			out := new(wrapperspb.BytesValue)
			if err := cc.Invoke(ctx, "/enginetest.T/Echo", in, out); err != nil {
				errs <- err
			} else if !bytes.Equal(in.Value, out.Value) {
				errs <- errors.New("mismatch")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
