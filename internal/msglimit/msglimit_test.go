package msglimit

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// grpc-go's texts for a message over a limit become texts naming the key:
// the sender's own limit (not sent), the server's (a received message the
// size of the request: refused by the receiver) and this side's on the
// reply (any other size). Other errors, other ResourceExhausted texts
// (an overloaded peer's) and unknown wordings pass unchanged.
func TestName(t *testing.T) {
	req := wrapperspb.Bytes(make([]byte, 5000)) // 5003 bytes on the wire
	for _, c := range []struct {
		in   error
		want string
	}{
		{status.Error(codes.ResourceExhausted, "trying to send message larger than max (5003 vs. 4096)"),
			"message of 5003 bytes not sent: this node's max-message-bytes is 4096"},
		{status.Error(codes.ResourceExhausted, "grpc: received message larger than max (5003 vs. 4096)"),
			"message of 5003 bytes refused: the receiver's max-message-bytes is 4096"},
		{status.Error(codes.ResourceExhausted, "grpc: received message larger than max (9000 vs. 4096)"),
			"reply of 9000 bytes refused: this node's max-message-bytes is 4096"},
	} {
		got := Name(c.in, req)
		if st := status.Convert(got); st.Code() != codes.ResourceExhausted || st.Message() != c.want {
			t.Errorf("Name(%v) = %v, want ResourceExhausted %q", c.in, got, c.want)
		}
	}
	for _, in := range []error{
		nil,
		errors.New("plain"),
		status.Error(codes.ResourceExhausted, "transport: node inbox is full"),
		status.Error(codes.Internal, "grpc: received message larger than max (5003 vs. 4096)"),
		status.Error(codes.ResourceExhausted, "grpc: received message after decompression larger than max 4096"),
	} {
		if got := Name(in, req); got != in {
			t.Errorf("Name(%v) = %v, want it unchanged", in, got)
		}
	}
}
