// Package echo is the one test service of the peer servers: a small Echo
// service written as a plain grpc.ServiceDesc (no generated code, only
// well-known protobuf types). peerbench measures its Echo method; the
// conformance tests (tools/peerservers/kinds), the pool's tests
// (transport/lf) and the comparison servers' tests (through lftest) drive
// the others.
package echo

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

// ServiceName is the full name of the Echo service.
const ServiceName = "electord.kinds.Echo"

// Full method names of the Echo service, for grpc.ClientConn.Invoke.
const (
	// MethodEcho takes a wrapperspb.BytesValue and returns the same bytes.
	MethodEcho = "/" + ServiceName + "/Echo"
	// MethodSleep takes a durationpb.Duration and returns emptypb.Empty after
	// that long, or the context's error (as a status) if the call ends first.
	MethodSleep = "/" + ServiceName + "/Sleep"
	// MethodFail takes a wrapperspb.StringValue "Code:message" (Code as
	// codes.Code.String spells it, e.g. "NotFound", or a number) and returns
	// that status.
	MethodFail = "/" + ServiceName + "/Fail"
	// MethodMetadata takes emptypb.Empty and echoes every incoming metadata
	// key that starts with "x-" into both the response header and trailer.
	MethodMetadata = "/" + ServiceName + "/Metadata"
	// MethodPanic takes emptypb.Empty and panics.
	MethodPanic = "/" + ServiceName + "/Panic"
	// MethodBlock takes a wrapperspb.BytesValue, signals Entered, waits for
	// Release to close (or for its context to end) and returns the same
	// bytes.
	MethodBlock = "/" + ServiceName + "/Block"
)

// PanicValue is what the Panic method panics with.
const PanicValue = "echo: Panic method called"

// Server implements the Echo service. Its zero value is ready to use; it
// counts what it did so tests can observe the server side. Block needs the
// channels New makes.
type Server struct {
	// Entered, if not nil, gets a value when a Sleep or Block handler
	// starts.
	Entered chan struct{}
	// Release, closed, lets every Block handler return; while it is nil or
	// open they wait (or end with their context).
	Release chan struct{}
	// OnEcho, if not nil, is called with each Echo call's context (tests
	// look at what the server put in it). Set it before serving.
	OnEcho func(context.Context)

	calls    atomic.Int64
	sleeping atomic.Int64
	sleeps   atomic.Int64
	canceled atomic.Int64
}

// New returns a Server with Entered (room for 1024 signals) and Release.
func New() *Server {
	return &Server{Entered: make(chan struct{}, 1024), Release: make(chan struct{})}
}

// Calls returns how many handlers have been entered.
func (e *Server) Calls() int64 { return e.calls.Load() }

// Sleeping returns how many Sleep handlers are running now.
func (e *Server) Sleeping() int64 { return e.sleeping.Load() }

// Sleeps returns how many Sleep handlers have been entered.
func (e *Server) Sleeps() int64 { return e.sleeps.Load() }

// Canceled returns how many Sleep and Block handlers ended because their
// context ended first.
func (e *Server) Canceled() int64 { return e.canceled.Load() }

// Echo returns its argument.
func (e *Server) Echo(ctx context.Context, in *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
	if e.OnEcho != nil {
		e.OnEcho(ctx)
	}
	return wrapperspb.Bytes(in.GetValue()), nil
}

// Sleep waits for the duration or for ctx to end.
func (e *Server) Sleep(ctx context.Context, in *durationpb.Duration) (*emptypb.Empty, error) {
	if err := in.CheckValid(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	e.sleeps.Add(1)
	e.sleeping.Add(1)
	e.entered()
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

// Block waits for Release or for ctx to end.
func (e *Server) Block(ctx context.Context, in *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
	e.entered()
	select {
	case <-e.Release:
		return wrapperspb.Bytes(in.GetValue()), nil
	case <-ctx.Done():
		e.canceled.Add(1)
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

func (e *Server) entered() {
	if e.Entered != nil {
		e.Entered <- struct{}{}
	}
}

// Fail returns the status that in describes ("Code:message").
func (e *Server) Fail(_ context.Context, in *wrapperspb.StringValue) (*emptypb.Empty, error) {
	name, msg, ok := strings.Cut(in.GetValue(), ":")
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "echo: Fail wants \"Code:message\", got %q", in.GetValue())
	}
	c, err := ParseCode(name)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return nil, status.Error(c, msg)
}

// Metadata echoes the incoming "x-" metadata into header and trailer.
func (e *Server) Metadata(ctx context.Context, _ *emptypb.Empty) (*emptypb.Empty, error) {
	in, _ := metadata.FromIncomingContext(ctx)
	out := metadata.MD{}
	for k, vs := range in {
		if strings.HasPrefix(k, "x-") {
			out[k] = append([]string(nil), vs...)
		}
	}
	if err := grpc.SetHeader(ctx, out); err != nil {
		return nil, status.Errorf(codes.Internal, "echo: SetHeader: %v", err)
	}
	if err := grpc.SetTrailer(ctx, out); err != nil {
		return nil, status.Errorf(codes.Internal, "echo: SetTrailer: %v", err)
	}
	return &emptypb.Empty{}, nil
}

// Panic panics.
func (e *Server) Panic(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
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
	return 0, fmt.Errorf("echo: unknown status code %q", s)
}

// echoService is the HandlerType of Desc.
type echoService interface {
	Echo(context.Context, *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error)
	Sleep(context.Context, *durationpb.Duration) (*emptypb.Empty, error)
	Fail(context.Context, *wrapperspb.StringValue) (*emptypb.Empty, error)
	Metadata(context.Context, *emptypb.Empty) (*emptypb.Empty, error)
	Panic(context.Context, *emptypb.Empty) (*emptypb.Empty, error)
	Block(context.Context, *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error)
}

var _ echoService = (*Server)(nil)

// unary builds a grpc.MethodHandler the way generated code does: decode the
// request, then call the method directly or through the interceptor.
func unary[Req any, PReq interface{ *Req }](fullMethod string, call func(echoService, context.Context, PReq) (any, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := PReq(new(Req))
		if err := dec(in); err != nil {
			return nil, err
		}
		svc := srv.(echoService)
		if es, ok := srv.(*Server); ok {
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

// Desc describes the Echo service. All its methods are unary.
var Desc = grpc.ServiceDesc{
	ServiceName: ServiceName,
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
		{MethodName: "Block", Handler: unary(MethodBlock, func(s echoService, ctx context.Context, in *wrapperspb.BytesValue) (any, error) {
			return s.Block(ctx, in)
		})},
	},
	Metadata: "echo/echo.go",
}

// Register registers a fresh Server on r.
func Register(r grpc.ServiceRegistrar) { RegisterServer(r, new(Server)) }

// RegisterServer registers s on r, so the caller can watch its counters.
func RegisterServer(r grpc.ServiceRegistrar, s *Server) {
	r.RegisterService(&Desc, s)
}
