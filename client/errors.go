package client

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// EndpointError is why one endpoint did not answer.
type EndpointError struct {
	Endpoint string
	Err      error
}

func (e EndpointError) Error() string { return e.Endpoint + ": " + reason(e.Err) }

// Unwrap returns the underlying error.
func (e EndpointError) Unwrap() error { return e.Err }

// NoEndpointError says that no endpoint answered: Tried holds why, in the
// order tried. Ctx is the context's error when the context ended before
// an endpoint answered (then the gRPC code is DeadlineExceeded or
// Canceled rather than Unavailable).
type NoEndpointError struct {
	Tried []EndpointError
	Ctx   error
}

func (e *NoEndpointError) Error() string {
	var head string
	switch {
	case errors.Is(e.Ctx, context.DeadlineExceeded):
		head = "deadline exceeded before an endpoint answered"
	case e.Ctx != nil:
		head = "canceled before an endpoint answered"
	default:
		head = "no endpoint answered"
	}
	if len(e.Tried) == 0 {
		return head
	}
	parts := make([]string, len(e.Tried))
	for i, t := range e.Tried {
		parts[i] = t.Error()
	}
	return head + " (" + strings.Join(parts, "; ") + ")"
}

// Unwrap returns the context's error, if any, and the endpoints' errors.
func (e *NoEndpointError) Unwrap() []error {
	var out []error
	if e.Ctx != nil {
		out = append(out, e.Ctx)
	}
	for _, t := range e.Tried {
		out = append(out, t)
	}
	return out
}

// GRPCStatus makes status.Code work on a NoEndpointError.
func (e *NoEndpointError) GRPCStatus() *status.Status {
	code := codes.Unavailable
	switch {
	case errors.Is(e.Ctx, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case e.Ctx != nil:
		code = codes.Canceled
	}
	return status.New(code, e.Error())
}

// reason is the short cause of a connection error: "connection refused"
// rather than grpc's `connection error: desc = "transport: Error while
// dialing: dial tcp 127.0.0.1:7070: connect: connection refused"`.
func reason(err error) string {
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		msg = st.Message()
	}
	msg = strings.TrimRight(msg, `"`)
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		msg = msg[i+2:]
	}
	return msg
}

// unreachable reports whether err means the endpoint could not be asked,
// as opposed to an answer: an Unavailable that did not come from an
// Elector service (which attaches its LeaderInfo to every Unavailable).
func unreachable(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return false
	}
	for _, d := range st.Details() {
		if _, ok := d.(*electordv1.LeaderInfo); ok {
			return false
		}
	}
	return true
}
