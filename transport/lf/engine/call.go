package engine

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Call is one unary call assembled by a Session. The Session fills in the
// request; Run fills in the result; Finish (back on the Session's holder)
// writes it. A Call lives in its stream, which the Session reuses once the
// answer is written: nothing may keep a Call after Finish (or Reject). The
// handler's context is not part of it and may outlive the call.
type Call struct {
	stream   uint32
	method   string
	entry    methodEntry
	timeout  time.Duration // 0: none
	received time.Time     // when the headers arrived, if timeout > 0
	req      []byte        // the message, without the 5-byte prefix
	peer     *peer.Peer    // the connection's peer, shared by its calls
	ctx      *callCtx      // made with the call; the handler's context

	resp     []byte
	st       *status.Status // nil: OK
	header   metadata.MD
	trailer  metadata.MD
	panicked bool

	// With Session.CancelOnReset: the Session's holder may abort the call
	// while Run is in progress on another goroutine.
	cancelable bool

	// Room for a small response without an allocation of its own.
	respInline [128]byte
}

// abort cancels the call's context (now, or from the start if Run has not
// begun).
func (c *Call) abort() { c.ctx.cancel(context.Canceled) }

// Method returns the call's full method name ("/pkg.Service/Method").
func (c *Call) Method() string { return c.method }

// Panicked reports whether the handler panicked (valid after Run).
func (c *Call) Panicked() bool { return c.panicked }

// Err returns the call's error status as an error (valid after Run); nil
// when the handler succeeded.
func (c *Call) Err() error {
	if c.st == nil {
		return nil
	}
	return c.st.Err()
}

// Run runs the call's handler with a context derived from base that carries
// the call's deadline (grpc-timeout), incoming metadata, peer and a
// grpc.ServerTransportStream for grpc.SetHeader/SetTrailer; the context
// ends when the handler returns. A panic in the handler is recovered and
// becomes an Internal error. Run touches only the Call, so it may run on
// another goroutine than the Session's holder.
func (c *Call) Run(base context.Context) {
	cc := c.ctx
	cc.start(base, c.received, c.timeout)
	defer cc.end()
	var ctx context.Context = cc
	if !ctxKeys.ok {
		// grpc-go looks its values up some other way than we learnt:
		// carry them the documented way.
		ctx = metadata.NewIncomingContext(ctx, cc.incomingMD())
		if c.peer != nil {
			ctx = peer.NewContext(ctx, c.peer)
		}
		ctx = grpc.NewContextWithServerTransportStream(ctx, (*callStream)(cc))
	}
	defer func() {
		if r := recover(); r != nil {
			c.panicked = true
			c.resp = nil
			c.st = status.Newf(codes.Internal, "engine: handler for %s panicked: %v", c.method, r)
		}
	}()
	dec := func(m any) error {
		pm, ok := m.(proto.Message)
		if !ok {
			return status.Errorf(codes.Internal, "engine: request type %T is not a proto message", m)
		}
		if err := proto.Unmarshal(c.req, pm); err != nil {
			return status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
		}
		return nil
	}
	out, err := c.entry.h(c.entry.impl, ctx, dec, nil)
	if err != nil {
		st, ok := status.FromError(err)
		if !ok {
			st = status.FromContextError(err)
		}
		if st.Code() == codes.OK { // a handler returning an OK status as an error
			st = status.New(codes.Unknown, err.Error())
		}
		c.st = st
		return
	}
	pm, ok := out.(proto.Message)
	if !ok {
		c.st = status.Newf(codes.Internal, "engine: response type %T is not a proto message", out)
		return
	}
	b, err := proto.MarshalOptions{}.MarshalAppend(c.respInline[:0], pm)
	if err != nil {
		c.st = status.Newf(codes.Internal, "grpc: error while marshaling: %v", err)
		return
	}
	c.resp = b
}

// callStream lets handlers use grpc.SetHeader, grpc.SendHeader and
// grpc.SetTrailer. Headers always leave with the response. Once the handler
// returned, they fail, as with grpc-go.
type callStream callCtx

var errCallEnded = errors.New("engine: the call has ended; metadata can no longer be set")

func (s *callStream) Method() string { return s.method }

func (s *callStream) SetHeader(md metadata.MD) error {
	return s.join(md, func(c *Call) *metadata.MD { return &c.header })
}

func (s *callStream) SendHeader(md metadata.MD) error { return s.SetHeader(md) }

func (s *callStream) SetTrailer(md metadata.MD) error {
	return s.join(md, func(c *Call) *metadata.MD { return &c.trailer })
}

// join adds md to the call's header or trailer while the handler runs.
func (s *callStream) join(md metadata.MD, field func(*Call) *metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.call == nil {
		return errCallEnded
	}
	f := field(s.call)
	*f = metadata.Join(*f, md)
	return nil
}

// reservedHeader reports header names the transport owns, which do not
// become metadata (the same set grpc-go keeps out).
func reservedHeader(name string) bool {
	switch name {
	case "content-type", "grpc-message-type", "grpc-encoding", "grpc-message",
		"grpc-status", "grpc-timeout", "grpc-status-details-bin", "te",
		"grpc-accept-encoding", "grpc-previous-rpc-attempts", "grpc-retry-pushback-ms":
		return true
	}
	return false
}

// decodeMetaValue decodes a -bin value (base64, padded or not).
func decodeMetaValue(name, v string) (string, error) {
	if !strings.HasSuffix(name, "-bin") {
		return v, nil
	}
	if len(v)%4 == 0 {
		b, err := base64.StdEncoding.DecodeString(v)
		return string(b), err
	}
	b, err := base64.RawStdEncoding.DecodeString(v)
	return string(b), err
}

func encodeMetaValue(name, v string) string {
	if strings.HasSuffix(name, "-bin") {
		return base64.RawStdEncoding.EncodeToString([]byte(v))
	}
	return v
}

// parseTimeout parses a grpc-timeout value: at most 8 digits and a unit.
func parseTimeout(v string) (time.Duration, error) {
	if len(v) < 2 || len(v) > 9 {
		return 0, fmt.Errorf("malformed grpc-timeout %q", v)
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("malformed grpc-timeout %q", v)
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, fmt.Errorf("malformed grpc-timeout %q: unknown unit", v)
	}
	d := time.Duration(n) * unit
	if d <= 0 {
		d = time.Nanosecond // an expired deadline still is one
	}
	return d, nil
}

// encodeGRPCMessage percent-encodes a grpc-message value: bytes outside
// printable ASCII, and '%', become %XX.
func encodeGRPCMessage(msg string) string {
	plain := true
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c < 0x20 || c > 0x7e || c == '%' {
			plain = false
			break
		}
	}
	if plain {
		return msg
	}
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}
