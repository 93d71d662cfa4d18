// Package msglimit words the refusal of a message over the size limit the
// max-message-bytes key sets, so that whoever reads the error (the caller,
// an operator in a log) learns which key to look at and by how much the
// message missed it. The gRPC code stays ResourceExhausted throughout:
// callers decide on the code, people on the text.
package msglimit

import (
	"context"
	"regexp"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Key is the configuration key of the limit.
const Key = "max-message-bytes"

// Refused is the status a receiver ends a call with when its request of
// size bytes is larger than the receiver's limit.
func Refused(size, limit int) *status.Status {
	return status.Newf(codes.ResourceExhausted,
		"a %d-byte message was refused: the receiver's %s is %d", size, Key, limit)
}

// notSent: the sender's own limit stopped the request before it left.
func notSent(size, limit int) error {
	return status.Errorf(codes.ResourceExhausted,
		"a %d-byte message was not sent: this node's %s is %d", size, Key, limit)
}

// replyRefused: the caller's limit refused the server's reply.
func replyRefused(size, limit int) error {
	return status.Errorf(codes.ResourceExhausted,
		"a %d-byte reply was refused: this node's %s is %d", size, Key, limit)
}

// grpcText matches grpc-go's own texts for a message over a size limit:
// "trying to send message larger than max (N vs. M)" from the sending side
// and "grpc: received message larger than max (N vs. M)" from the
// receiving one (a grpc-go server's, written on the wire before any
// handler or interceptor of ours runs).
var grpcText = regexp.MustCompile(`(trying to send|received) message larger than max \((\d+) vs\. (\d+)\)`)

// Name returns err with grpc-go's text for a message over a size limit
// replaced by one naming Key; any other error is returned as it is. req is
// the call's request: a received message of exactly its size is the
// request, refused by the server; any other received message is the reply,
// refused by this side.
func Name(err error, req any) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted {
		return err
	}
	m := grpcText.FindStringSubmatch(st.Message())
	if m == nil {
		return err
	}
	size, err1 := strconv.Atoi(m[2])
	limit, err2 := strconv.Atoi(m[3])
	if err1 != nil || err2 != nil {
		return err
	}
	if m[1] == "trying to send" {
		return notSent(size, limit)
	}
	if p, ok := req.(proto.Message); ok && proto.Size(p) == size {
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
