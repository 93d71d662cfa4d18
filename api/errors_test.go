package api

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
)

type leaderOnly struct{ Backend }

func (leaderOnly) Leader() node.LeaderInfo {
	return node.LeaderInfo{State: node.StateElecting, Term: 7}
}

func TestStatusError(t *testing.T) {
	s := &service{b: leaderOnly{}}
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{node.ErrUnknownNode, codes.NotFound},
		{fmt.Errorf("transfer: %w", node.ErrUnknownNode), codes.NotFound},
		{node.ErrNotLeader, codes.FailedPrecondition},
		{node.ErrKilled, codes.FailedPrecondition},
		{election.ErrNoCandidate, codes.FailedPrecondition},
		{node.ErrStopped, codes.Unavailable},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{fmt.Errorf("x: %w", context.Canceled), codes.Canceled},
		{grpcstatus.Error(codes.Aborted, "kept"), codes.Aborted},
		{errors.New("disk on fire"), codes.Unknown},
	} {
		got := s.statusError(tc.err)
		st := grpcstatus.Convert(got)
		if st.Code() != tc.code || st.Message() != tc.err.Error() && tc.code != codes.Aborted {
			t.Errorf("%v → %v %q; want %v", tc.err, st.Code(), st.Message(), tc.code)
		}
		if tc.code == codes.Unavailable && !answered(st) {
			t.Errorf("%v: Unavailable without the LeaderInfo detail", tc.err)
		}
	}
	if s.statusError(nil) != nil {
		t.Error("nil error mapped to non-nil")
	}
}
