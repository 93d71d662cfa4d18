// Package msglimit words the refusal of a message over the size limit the
// max-message-bytes key sets, so that whoever reads the error (the caller,
// an operator in a log) learns which key to look at and by how much the
// message missed it. The gRPC code stays ResourceExhausted throughout:
// callers decide on the code, people on the text.
package msglimit

import (
	"context"
	"log/slog"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Key is the configuration key of the limit.
const Key = "max-message-bytes"

// Refused is the status a receiver ends a call with when its request of
// size bytes is larger than the receiver's limit.
func Refused(size, limit int) *status.Status {
	return status.Newf(codes.ResourceExhausted,
		"message of %d bytes refused: the receiver's %s is %d", size, Key, limit)
}

// notSent: the sender's own limit stopped the request before it left.
func notSent(size, limit int) error {
	return status.Errorf(codes.ResourceExhausted,
		"message of %d bytes not sent: this node's %s is %d", size, Key, limit)
}

// replyRefused: the caller's limit refused the server's reply.
func replyRefused(size, limit int) error {
	return status.Errorf(codes.ResourceExhausted,
		"reply of %d bytes refused: this node's %s is %d", size, Key, limit)
}

// grpcText matches grpc-go's own texts for a message over a size limit:
// "trying to send message larger than max (N vs. M)" from the sending side
// and "grpc: received message larger than max (N vs. M)" from the
// receiving one (a grpc-go server's, written on the wire before any
// handler or interceptor of ours runs).
var grpcText = regexp.MustCompile(`(trying to send|received) message larger than max \((\d+) vs\. (\d+)\)`)

// parse reads grpc-go's text for a message over a size limit from err:
// whether it was the sending side's, the message's size and the limit.
func parse(err error) (sending bool, size, limit int, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus || st.Code() != codes.ResourceExhausted {
		return false, 0, 0, false
	}
	m := grpcText.FindStringSubmatch(st.Message())
	if m == nil {
		return false, 0, 0, false
	}
	size, err1 := strconv.Atoi(m[2])
	limit, err2 := strconv.Atoi(m[3])
	return m[1] == "trying to send", size, limit, err1 == nil && err2 == nil
}

// Name returns err with grpc-go's text for a message over a size limit
// replaced by one naming Key; any other error is returned as it is. req is
// the call's request: a received message of exactly its size is the
// request, refused by the server; any other received message is the reply,
// refused by this side.
func Name(err error, req any) error {
	sending, size, limit, ok := parse(err)
	switch {
	case !ok:
		return err
	case sending:
		return notSent(size, limit)
	}
	if p, isProto := req.(proto.Message); isProto && proto.Size(p) == size {
		return Refused(size, limit).Err()
	}
	return replyRefused(size, limit)
}

// UnaryClientInterceptor applies Name to every unary call's error: a
// grpc-go client and a grpc-go server word a message over their limit
// without the key that sets it, and neither can be told otherwise.
func UnaryClientInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
		return Name(err, req)
	}
	return nil
}

// LogRefusals is a server's stats.Handler that logs, at WARN and at most
// once a second, a call whose request the server refused for its size,
// with a text naming Key. A grpc-go server writes its own text to the
// caller before any handler or interceptor runs, so the log is where an
// operator can learn which key refused the request. port names the server
// in the line.
func LogRefusals(log *slog.Logger, port string) stats.Handler {
	return &refusalLog{log: log, port: port}
}

type refusalLog struct {
	log     *slog.Logger
	port    string
	lastLog atomic.Int64 // UnixNano of the last line
}

func (r *refusalLog) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (r *refusalLog) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (r *refusalLog) HandleConn(context.Context, stats.ConnStats)                       {}

func (r *refusalLog) HandleRPC(ctx context.Context, s stats.RPCStats) {
	end, isEnd := s.(*stats.End)
	if !isEnd || end.Error == nil {
		return
	}
	sending, size, limit, ok := parse(end.Error)
	if !ok || sending {
		return
	}
	now, last := time.Now().UnixNano(), r.lastLog.Load()
	if now-last < int64(time.Second) || !r.lastLog.CompareAndSwap(last, now) {
		return
	}
	method, _ := grpc.Method(ctx)
	r.log.Warn(r.port+": refused a request over max-message-bytes (further ones within 1 s are not logged)",
		"method", method, "err", Refused(size, limit).Message())
}
