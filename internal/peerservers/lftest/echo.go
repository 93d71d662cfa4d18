// Package lftest holds shared fixtures for the lf engine and its drivers: a
// small Echo service written as a plain grpc.ServiceDesc (no generated code,
// only well-known protobuf types), and Start, which runs any of the server
// kinds (stock grpc-go, or an engine driver) on a loopback port. The
// conformance tests of this package and the benchmarks elsewhere use both.
package lftest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// EchoServiceName is the full name of the Echo service.
const EchoServiceName = "electord.lftest.Echo"

// Full method names of the Echo service, for grpc.ClientConn.Invoke.
const (
	// MethodEcho takes a wrapperspb.BytesValue and returns the same bytes.
	MethodEcho = "/" + EchoServiceName + "/Echo"
	// MethodSleep takes a durationpb.Duration and returns emptypb.Empty after
	// that long, or the context's error (as a status) if the call ends first.
	MethodSleep = "/" + EchoServiceName + "/Sleep"
	// MethodFail takes a wrapperspb.StringValue "Code:message" (Code as
	// codes.Code.String spells it, e.g. "NotFound", or a number) and returns
	// that status.
	MethodFail = "/" + EchoServiceName + "/Fail"
	// MethodMetadata takes emptypb.Empty and echoes every incoming metadata
	// key that starts with "x-" into both the response header and trailer.
	MethodMetadata = "/" + EchoServiceName + "/Metadata"
	// MethodPanic takes emptypb.Empty and panics.
	MethodPanic = "/" + EchoServiceName + "/Panic"
)

// PanicValue is what the Panic method panics with.
const PanicValue = "lftest: Panic method called"

// EchoServer implements the Echo service. Its zero value is ready to use; it
// counts what it did so tests can observe the server side.
type EchoServer struct {
	calls    atomic.Int64
	sleeping atomic.Int64
	sleeps   atomic.Int64
	canceled atomic.Int64
}

// Calls returns how many handlers have been entered.
func (e *EchoServer) Calls() int64 { return e.calls.Load() }

// Sleeping returns how many Sleep handlers are running now.
func (e *EchoServer) Sleeping() int64 { return e.sleeping.Load() }

// Sleeps returns how many Sleep handlers have been entered.
func (e *EchoServer) Sleeps() int64 { return e.sleeps.Load() }

// Canceled returns how many Sleep handlers ended because their context
// ended before the duration passed.
func (e *EchoServer) Canceled() int64 { return e.canceled.Load() }

// Echo returns its argument.
func (e *EchoServer) Echo(_ context.Context, in *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
	return wrapperspb.Bytes(in.GetValue()), nil
}

// Sleep waits for the duration or for ctx to end.
func (e *EchoServer) Sleep(ctx context.Context, in *durationpb.Duration) (*emptypb.Empty, error) {
	if err := in.CheckValid(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	e.sleeps.Add(1)
	e.sleeping.Add(1)
	defer e.sleeping.Add(-1)
	t := time.NewTimer(in.AsDuration())
	defer t.Stop()
	select {
	case <-t.C:
		return &emptypb.Empty{}, nil
	case <-ctx.Done():
		e.canceled.Add(1)
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// Fail returns the status that in describes ("Code:message").
func (e *EchoServer) Fail(_ context.Context, in *wrapperspb.StringValue) (*emptypb.Empty, error) {
	name, msg, ok := strings.Cut(in.GetValue(), ":")
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "lftest: Fail wants \"Code:message\", got %q", in.GetValue())
	}
	c, err := ParseCode(name)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return nil, status.Error(c, msg)
}

// Metadata echoes the incoming "x-" metadata into header and trailer.
func (e *EchoServer) Metadata(ctx context.Context, _ *emptypb.Empty) (*emptypb.Empty, error) {
	in, _ := metadata.FromIncomingContext(ctx)
	out := metadata.MD{}
	for k, vs := range in {
		if strings.HasPrefix(k, "x-") {
			out[k] = append([]string(nil), vs...)
		}
	}
	if err := grpc.SetHeader(ctx, out); err != nil {
		return nil, status.Errorf(codes.Internal, "lftest: SetHeader: %v", err)
	}
	if err := grpc.SetTrailer(ctx, out); err != nil {
		return nil, status.Errorf(codes.Internal, "lftest: SetTrailer: %v", err)
	}
	return &emptypb.Empty{}, nil
}

// Panic panics.
func (e *EchoServer) Panic(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	panic(PanicValue)
}

// ParseCode parses a status code as codes.Code.String spells it ("NotFound")
// or as a number ("5").
func ParseCode(s string) (codes.Code, error) {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if c.String() == s {
			return c, nil
		}
	}
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return codes.Code(n), nil
	}
	return 0, fmt.Errorf("lftest: unknown status code %q", s)
}

// echoService is the HandlerType of EchoServiceDesc.
type echoService interface {
	Echo(context.Context, *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error)
	Sleep(context.Context, *durationpb.Duration) (*emptypb.Empty, error)
	Fail(context.Context, *wrapperspb.StringValue) (*emptypb.Empty, error)
	Metadata(context.Context, *emptypb.Empty) (*emptypb.Empty, error)
	Panic(context.Context, *emptypb.Empty) (*emptypb.Empty, error)
}

var _ echoService = (*EchoServer)(nil)

// unary builds a grpc.MethodHandler the way generated code does: decode the
// request, then call the method directly or through the interceptor.
func unary[Req any, PReq interface{ *Req }](fullMethod string, call func(echoService, context.Context, PReq) (any, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := PReq(new(Req))
		if err := dec(in); err != nil {
			return nil, err
		}
		svc := srv.(echoService)
		if es, ok := srv.(*EchoServer); ok {
			es.calls.Add(1)
		}
		if interceptor == nil {
			return call(svc, ctx, in)
		}
		info := &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod}
		return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
			return call(svc, ctx, req.(PReq))
		})
	}
}

// EchoServiceDesc describes the Echo service. All its methods are unary.
var EchoServiceDesc = grpc.ServiceDesc{
	ServiceName: EchoServiceName,
	HandlerType: (*echoService)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Echo", Handler: unary(MethodEcho, func(s echoService, ctx context.Context, in *wrapperspb.BytesValue) (any, error) {
			return s.Echo(ctx, in)
		})},
		{MethodName: "Sleep", Handler: unary(MethodSleep, func(s echoService, ctx context.Context, in *durationpb.Duration) (any, error) {
			return s.Sleep(ctx, in)
		})},
		{MethodName: "Fail", Handler: unary(MethodFail, func(s echoService, ctx context.Context, in *wrapperspb.StringValue) (any, error) {
			return s.Fail(ctx, in)
		})},
		{MethodName: "Metadata", Handler: unary(MethodMetadata, func(s echoService, ctx context.Context, in *emptypb.Empty) (any, error) {
			return s.Metadata(ctx, in)
		})},
		{MethodName: "Panic", Handler: unary(MethodPanic, func(s echoService, ctx context.Context, in *emptypb.Empty) (any, error) {
			return s.Panic(ctx, in)
		})},
	},
	Metadata: "lftest/echo.go",
}

// RegisterEcho registers a fresh EchoServer on r.
func RegisterEcho(r grpc.ServiceRegistrar) { RegisterEchoServer(r, new(EchoServer)) }

// RegisterEchoServer registers s on r, so the caller can watch its counters.
func RegisterEchoServer(r grpc.ServiceRegistrar, s *EchoServer) {
	r.RegisterService(&EchoServiceDesc, s)
}
