package api_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// notAnswered fails unless err is Unavailable without the LeaderInfo
// detail: what clients take for an endpoint that is down.
func notAnswered(t *testing.T, what string, err error) {
	t.Helper()
	st := grpcstatus.Convert(err)
	if err == nil || st.Code() != codes.Unavailable || len(st.Details()) != 0 || st.Message() == "" {
		t.Fatalf("%s on a killed node: %v (details %v); want Unavailable without details", what, err, st.Details())
	}
}

// A killed node answers like a crashed one, except Kill and Revive (issue 10).
func TestKilledNodeIsUnavailable(t *testing.T) {
	c, _, cl := cluster(t, 3)
	c.Elect(3)
	ctx := ctxT(t)
	watch, err := cl[0].WatchLeader(ctx, &electordv1.WatchLeaderRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatal(err)
	}
	if _, err := cl[0].Kill(ctx, &electordv1.KillRequest{Id: 1}); err != nil {
		t.Fatal(err)
	}
	// The open stream ends at the next change, as if the node went down.
	c.Elect(2)
	for {
		_, err := watch.Recv()
		if err != nil {
			notAnswered(t, "an open WatchLeader", err)
			break
		}
	}

	_, err = cl[0].GetLeader(ctx, &electordv1.GetLeaderRequest{})
	notAnswered(t, "GetLeader", err)
	_, err = cl[0].Status(ctx, &electordv1.StatusRequest{})
	notAnswered(t, "Status", err)
	_, err = cl[0].Members(ctx, &electordv1.MembersRequest{})
	notAnswered(t, "Members", err)
	_, err = cl[0].Resign(ctx, &electordv1.ResignRequest{})
	notAnswered(t, "Resign", err)
	_, err = cl[0].Transfer(ctx, &electordv1.TransferRequest{Id: 2})
	notAnswered(t, "Transfer", err)
	w, err := cl[0].WatchLeader(ctx, &electordv1.WatchLeaderRequest{})
	if err == nil {
		_, err = w.Recv()
	}
	notAnswered(t, "WatchLeader", err)

	// Kill (again) and Revive are served; then everything answers again.
	if _, err := cl[0].Kill(ctx, &electordv1.KillRequest{Id: 1}); err != nil {
		t.Fatalf("Kill on a killed node: %v", err)
	}
	if _, err := cl[0].Revive(ctx, &electordv1.ReviveRequest{Id: 1}); err != nil {
		t.Fatalf("Revive on a killed node: %v", err)
	}
	if li, err := cl[0].GetLeader(ctx, &electordv1.GetLeaderRequest{}); err != nil || li.Id != 2 {
		t.Fatalf("GetLeader after revive: %v, %v", li, err)
	}
}
