package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// ForwardedKey is the gRPC metadata key set on a command one node forwards
// to another. A forwarded command is never forwarded again, so two nodes
// that disagree about who leads cannot bounce a command between them.
const ForwardedKey = "electord-forwarded"

// NewElectorService returns the Elector gRPC service of one node.
//
// Commands are routed as follows (every forward carries the caller's
// deadline and is made at most once):
//
//   - Kill and Revive act on b when id is b.Self(); another id is forwarded
//     to that member's api address from b.Members(), alive or not (a killed
//     member still serves its API). An id that is not a member is NotFound.
//   - Resign and Transfer act on b when b leads, and are forwarded to the
//     current leader's api address otherwise, so they work against any
//     endpoint. With no known leader they fail with Unavailable. Transfer
//     checks first that its target is a member (NotFound otherwise);
//     Transfer to the node that already leads succeeds and changes nothing.
//     With an election named, they act on the node that leads that election
//     and are forwarded there once (resignNamed, transferNamed).
//   - Kill with exit set replies first, then calls b.Exit once the reply is
//     handed to the transport. Exit should stop the gRPC server gracefully
//     so that the reply reaches the caller.
//
// A killed node (electctl kill without --exit, Backend.Kill) answers like a
// crashed one: GetLeader, Status, Members, WatchLeader (new streams, and
// open ones at the next change), Resign and Transfer fail with Unavailable
// and NO LeaderInfo detail, which clients take for an unreachable endpoint,
// so they move on to their next one. Only Kill and Revive are served, so an
// operator can revive it (or end it with --exit) through its own endpoint
// or through another node's forward. The sidecar HTTP endpoint keeps
// answering (its /leader and /leader/self say no leader, 503; /healthz is
// about the process, which runs).
//
// Errors map to codes: node.ErrUnknownNode → NotFound (but a Transfer to a
// member that is not alive is FailedPrecondition); node.ErrNotLeader,
// node.ErrKilled, node.ErrNotAlive, node.ErrPreempted (a Resign or Transfer
// that preempt would undo at once) and election.ErrNoCandidate → FailedPrecondition;
// node.ErrStopped → Unavailable; context errors → DeadlineExceeded or
// Canceled. Every Unavailable this service returns carries the answering
// node's LeaderInfo as a status detail: that tells a client the node
// answered (and is not merely unreachable), so it need not try another
// endpoint.
func NewElectorService(b Backend) electordv1.ElectorServer {
	return &service{b: b}
}

// RegisterElector registers the Elector service for b on s.
func RegisterElector(s grpc.ServiceRegistrar, b Backend) {
	electordv1.RegisterElectorServer(s, NewElectorService(b))
}

// Keep-alive settings of the API server; the client library pings at
// most every 30 s while a stream is open, so the server must allow that.
const (
	serverPingTime      = 30 * time.Second // ping an idle client connection this often
	serverPingTimeout   = 10 * time.Second // and drop it if the ping is not answered in time
	serverMinClientPing = 10 * time.Second // clients may ping this often (grpc's default is 5 min)
)

// NewGRPCServer returns a gRPC server with the Elector service for b
// registered, and keep-alive settings that suit long WatchLeader streams
// (clients of package client ping every 30 s; grpc-go's default policy
// would close their connections). opts are appended. It sets no bounds of
// its own (grpc-go's apply): a node's API server is NewSecureGRPCServer
// with the configured Limits.
func NewGRPCServer(b Backend, opts ...grpc.ServerOption) *grpc.Server {
	return newGRPCServer(b, nil, 0, nil, opts)
}

// NewLimitedGRPCServer is NewGRPCServer with the bounds of l, every one
// required (Limits.Validate): streams per connection, request size, header
// list size, handshake and idle timeouts. Watches are bounded by wrapping b
// with LimitWatchers; connections, by serving a LimitListener.
func NewLimitedGRPCServer(b Backend, l Limits, opts ...grpc.ServerOption) (*grpc.Server, error) {
	return NewSecureGRPCServer(b, l, nil, opts...)
}

type service struct {
	electordv1.UnimplementedElectorServer
	b   Backend
	sec *Security // nil: plaintext, forwards too
	// owners: who opened each candidacy (with TLS; proclaimown.go).
	owners owners
}

// ---- conversions ----

// LeaderToProto converts a LeaderInfo to its wire form. A zero Since is sent
// as 0.
func LeaderToProto(l node.LeaderInfo) *electordv1.LeaderInfo {
	var since int64
	if !l.Since.IsZero() {
		since = l.Since.UnixNano()
	}
	return &electordv1.LeaderInfo{
		Id:            uint64(l.ID),
		Name:          l.Name,
		Address:       l.Address,
		Term:          uint64(l.Term),
		SinceUnixNano: since,
		Self:          l.Self,
		State:         l.State,
		Election:      l.Election,
		Value:         l.Value,
	}
}

// MemberToProto converts a MemberInfo to its wire form.
func MemberToProto(m node.MemberInfo) *electordv1.MemberStatus {
	return &electordv1.MemberStatus{
		Id:          uint64(m.ID),
		Name:        m.Name,
		PeerAddress: m.PeerAddr,
		ApiAddress:  m.APIAddr,
		Alive:       m.Alive,
		Role:        m.Role,
		Term:        uint64(m.Term),
		Algorithm:   m.Algorithm,
		Priority:    m.Priority,
	}
}

func membersToProto(ms []node.MemberInfo) []*electordv1.MemberStatus {
	out := make([]*electordv1.MemberStatus, len(ms))
	for i, m := range ms {
		out[i] = MemberToProto(m)
	}
	return out
}

// ---- errors ----

// statusError maps a Backend error to a gRPC status error.
func (s *service) statusError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := grpcstatus.FromError(err); ok {
		return err
	}
	var c codes.Code
	switch {
	case errors.Is(err, node.ErrUnknownNode):
		c = codes.NotFound
	case errors.Is(err, node.ErrNotLeader), errors.Is(err, node.ErrKilled), errors.Is(err, election.ErrNoCandidate),
		errors.Is(err, node.ErrNotAlive), errors.Is(err, node.ErrPreempted), errors.Is(err, node.ErrProbeFailing),
		errors.Is(err, node.ErrNotCandidate):
		c = codes.FailedPrecondition
	case errors.Is(err, node.ErrStopped):
		return s.unavailable(err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		c = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		c = codes.Canceled
	default:
		c = codes.Unknown
	}
	return grpcstatus.Error(c, err.Error())
}

// unavailable is an Unavailable status that says this node answered: it
// carries the node's LeaderInfo as a detail.
func (s *service) unavailable(msg string) error {
	st := grpcstatus.New(codes.Unavailable, msg)
	if d, err := st.WithDetails(LeaderToProto(s.b.Leader())); err == nil {
		st = d
	}
	return st.Err()
}

// killed is the error of every call but Kill and Revive on a killed node:
// Unavailable without the LeaderInfo detail, as if the node were down.
func (s *service) killed() error {
	if !s.b.Status().Killed {
		return nil
	}
	return grpcstatus.Errorf(codes.Unavailable, "node %d is killed (electctl kill): it serves only kill and revive until revived", s.b.Self())
}

// ---- queries ----

func (s *service) GetLeader(_ context.Context, req *electordv1.GetLeaderRequest) (*electordv1.LeaderInfo, error) {
	if err := s.killed(); err != nil {
		return nil, err
	}
	if req.GetElection() != "" {
		return s.getLeaderNamed(req.GetElection())
	}
	return LeaderToProto(s.b.Leader()), nil
}

func (s *service) Status(context.Context, *electordv1.StatusRequest) (*electordv1.StatusResponse, error) {
	st := s.b.Status()
	if st.Killed {
		return nil, s.killed()
	}
	return &electordv1.StatusResponse{
		SelfId:      uint64(st.Self),
		Algorithm:   st.Algorithm,
		Members:     membersToProto(st.Members),
		Leader:      LeaderToProto(st.Leader),
		NotStanding: st.NotStanding(),
	}, nil
}

func (s *service) Members(context.Context, *electordv1.MembersRequest) (*electordv1.MembersResponse, error) {
	if err := s.killed(); err != nil {
		return nil, err
	}
	return &electordv1.MembersResponse{Members: membersToProto(s.b.Members())}, nil
}

// WatchLeader sends this node's current LeaderInfo, then every change the
// Backend's subscription delivers, until the client goes away or the
// subscription ends (then Unavailable, so the client reconnects). A node's
// subscription says what its Leader answers (in quorum mode, the lease's
// start and its lapse by the clock), as /watch does.
//
// Seq starts at 1 and grows by one per event sent. Dropped is how many
// changes the subscription lost (slow reader) since the previous event
// sent. An event equal to the previous one sent is not repeated.
//
// Resuming: after_term is the highest term the client has already seen.
// Events whose term is below it are skipped: they are the view of a node
// that has not caught up yet (terms never decrease on a node, so once one
// event passes, all later ones do). An event AT after_term is sent, unlike
// the "greater than" of the proto comment: within one term the news can be
// that its leader is gone (a no-leader event carries the highest term the
// node knows, at least its last leader's), and the
// first event of a resumed stream is the answering node's current view,
// which the client may compare with what it had.
func (s *service) WatchLeader(req *electordv1.WatchLeaderRequest, stream grpc.ServerStreamingServer[electordv1.LeaderEvent]) error {
	ctx := stream.Context()
	after := election.Term(req.GetAfterTerm())
	if err := s.killed(); err != nil {
		return err
	}
	if req.GetElection() != "" {
		return s.watchNamed(req, stream)
	}
	sub, err := s.b.Subscribe()
	if errors.Is(err, ErrTooManyWatchers) {
		return grpcstatus.Error(codes.ResourceExhausted, err.Error())
	}
	if err != nil {
		return s.statusError(err)
	}
	defer sub.Close()

	var (
		seq, dropped uint64
		last         node.LeaderInfo
		sent         bool
	)
	send := func(li node.LeaderInfo) error {
		if li.Term < after || (sent && sameLeaderInfo(li, last)) {
			return nil
		}
		d := sub.Dropped()
		seq++
		ev := &electordv1.LeaderEvent{Leader: LeaderToProto(li), Seq: seq, Dropped: d - dropped}
		if err := stream.Send(ev); err != nil {
			return err
		}
		dropped, last, sent = d, li, true
		return nil
	}
	// Subscribed first, then read: no change can fall between the two.
	if err := send(s.b.Leader()); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return grpcstatus.FromContextError(ctx.Err()).Err()
		case li, ok := <-sub.C():
			if !ok {
				return s.unavailable("leader subscription ended (node stopping)")
			}
			if err := s.killed(); err != nil {
				return err
			}
			if err := send(li); err != nil {
				return err
			}
		}
	}
}

func sameLeaderInfo(a, b node.LeaderInfo) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Address == b.Address && a.Term == b.Term &&
		a.Since.Equal(b.Since) && a.Self == b.Self && a.State == b.State
}

// ---- commands ----

func (s *service) reply(msg string) *electordv1.CommandResponse {
	return &electordv1.CommandResponse{Message: msg, Leader: LeaderToProto(s.b.Leader())}
}

func forwarded(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(ForwardedKey)) > 0
}

// member finds id in b.Members().
func (s *service) member(id election.NodeID) (node.MemberInfo, error) {
	if id == 0 {
		return node.MemberInfo{}, grpcstatus.Error(codes.InvalidArgument, "a node id is required")
	}
	ms := s.b.Members()
	for _, m := range ms {
		if m.ID == id {
			return m, nil
		}
	}
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = fmt.Sprint(m.ID)
	}
	return node.MemberInfo{}, grpcstatus.Errorf(codes.NotFound, "node %d is not a member (members: %s)", id, strings.Join(ids, ", "))
}

// forward runs call against the Elector service at addr with the caller's
// deadline. An error from the remote node is returned as it is; failing to
// reach it becomes Unavailable with a message that names the target.
func (s *service) forward(ctx context.Context, what string, id election.NodeID, addr string,
	call func(context.Context, electordv1.ElectorClient) (*electordv1.CommandResponse, error),
) (*electordv1.CommandResponse, error) {
	if addr == "" {
		return nil, s.unavailable(fmt.Sprintf("%s: node %d has no known api address", what, id))
	}
	creds := insecure.NewCredentials()
	if s.sec != nil {
		creds = s.sec.forwardCredentials(uint64(id))
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, s.unavailable(fmt.Sprintf("%s: node %d at %s: %v", what, id, addr, err))
	}
	defer conn.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, ForwardedKey, fmt.Sprint(s.b.Self()))
	if caller, err := callerIdentity(ctx); err == nil {
		ctx = metadata.AppendToOutgoingContext(ctx, ForwardedForKey, caller.String())
	}
	resp, err := call(ctx, electordv1.NewElectorClient(conn))
	if err == nil {
		return resp, nil
	}
	st := grpcstatus.Convert(err)
	if st.Code() == codes.Unavailable && !answered(st) {
		return nil, s.unavailable(fmt.Sprintf("%s: node %d at %s did not answer: %s", what, id, addr, st.Message()))
	}
	return nil, err
}

// answered reports whether an Unavailable status came from an Elector
// service (which attaches its LeaderInfo) rather than from the transport.
func answered(st *grpcstatus.Status) bool {
	for _, d := range st.Details() {
		if _, ok := d.(*electordv1.LeaderInfo); ok {
			return true
		}
	}
	return false
}

// leaderTarget is where Resign and Transfer go when this node does not lead.
func (s *service) leaderTarget(ctx context.Context, what string) (election.NodeID, string, error) {
	li := s.b.Leader()
	if forwarded(ctx) {
		return 0, "", grpcstatus.Errorf(codes.FailedPrecondition, "%s: node %d does not lead (it sees %s)", what, s.b.Self(), describeLeader(li))
	}
	if !li.HasLeader() {
		return 0, "", s.unavailable(fmt.Sprintf("%s: no leader is known (node %d is %s, term %s); retry once one is elected",
			what, s.b.Self(), li.State, li.Term))
	}
	addr := li.Address
	if addr == "" {
		for _, m := range s.b.Members() {
			if m.ID == li.ID {
				addr = m.APIAddr
			}
		}
	}
	return li.ID, addr, nil
}

func describeLeader(li node.LeaderInfo) string {
	if !li.HasLeader() {
		return fmt.Sprintf("no leader, term %s", li.Term)
	}
	return fmt.Sprintf("leader %d in term %s", li.ID, li.Term)
}

func (s *service) Kill(ctx context.Context, req *electordv1.KillRequest) (*electordv1.CommandResponse, error) {
	id := election.NodeID(req.GetId())
	self := s.b.Self()
	if id == self {
		if req.GetExit() {
			go func() {
				<-ctx.Done() // the RPC has finished: the reply is queued
				s.b.Exit()
			}()
			return s.reply(fmt.Sprintf("node %d is exiting: it hands leadership over if it leads, leaves the cluster and stops for good (revive cannot bring it back)", id)), nil
		}
		was := s.b.Status().Killed
		if err := s.b.Kill(ctx); err != nil {
			return nil, s.statusError(err)
		}
		if was {
			return s.reply(fmt.Sprintf("node %d was killed already: nothing changed", id)), nil
		}
		return s.reply(fmt.Sprintf("node %d killed: it no longer answers its peers", id)), nil
	}
	m, err := s.member(id)
	if err != nil {
		return nil, err
	}
	if forwarded(ctx) {
		return nil, grpcstatus.Errorf(codes.FailedPrecondition, "kill: node %d got a command forwarded for node %d (api address of %d is wrong?)", self, id, id)
	}
	return s.forward(ctx, "kill", id, m.APIAddr, func(ctx context.Context, c electordv1.ElectorClient) (*electordv1.CommandResponse, error) {
		return c.Kill(ctx, req)
	})
}

func (s *service) Revive(ctx context.Context, req *electordv1.ReviveRequest) (*electordv1.CommandResponse, error) {
	id := election.NodeID(req.GetId())
	self := s.b.Self()
	if id == self {
		was := s.b.Status().Killed
		if err := s.b.Revive(ctx); err != nil {
			return nil, s.statusError(err)
		}
		if !was {
			return s.reply(fmt.Sprintf("node %d was not killed: nothing to revive", id)), nil
		}
		return s.reply(fmt.Sprintf("node %d revived: it rejoins from its persisted term", id)), nil
	}
	m, err := s.member(id)
	if err != nil {
		return nil, err
	}
	if forwarded(ctx) {
		return nil, grpcstatus.Errorf(codes.FailedPrecondition, "revive: node %d got a command forwarded for node %d (api address of %d is wrong?)", self, id, id)
	}
	return s.forward(ctx, "revive", id, m.APIAddr, func(ctx context.Context, c electordv1.ElectorClient) (*electordv1.CommandResponse, error) {
		return c.Revive(ctx, req)
	})
}

func (s *service) Resign(ctx context.Context, req *electordv1.ResignRequest) (*electordv1.CommandResponse, error) {
	if err := s.killed(); err != nil {
		return nil, err
	}
	if req.GetElection() != "" {
		return s.resignNamed(ctx, req)
	}
	if s.b.Leader().Self {
		if err := s.b.Resign(ctx); err != nil {
			return nil, s.statusError(err)
		}
		return s.reply(fmt.Sprintf("node %d resigned", s.b.Self())), nil
	}
	id, addr, err := s.leaderTarget(ctx, "resign")
	if err != nil {
		return nil, err
	}
	return s.forward(ctx, "resign", id, addr, func(ctx context.Context, c electordv1.ElectorClient) (*electordv1.CommandResponse, error) {
		return c.Resign(ctx, req)
	})
}

func (s *service) Transfer(ctx context.Context, req *electordv1.TransferRequest) (*electordv1.CommandResponse, error) {
	if err := s.killed(); err != nil {
		return nil, err
	}
	if req.GetElection() != "" {
		return s.transferNamed(ctx, req)
	}
	id := election.NodeID(req.GetId())
	if _, err := s.member(id); err != nil {
		return nil, err
	}
	if li := s.b.Leader(); li.Self {
		if id == s.b.Self() {
			return s.reply(fmt.Sprintf("node %d already leads", id)), nil
		}
		if err := s.b.Transfer(ctx, id); err != nil {
			if errors.Is(err, node.ErrUnknownNode) {
				// id is a member (checked above) that the election does
				// not count as live: it cannot lead now, it is no stranger.
				return nil, grpcstatus.Errorf(codes.FailedPrecondition, "transfer: node %d is a member but not alive: it cannot lead now (%v)", id, err)
			}
			return nil, s.statusError(err)
		}
		return s.reply(fmt.Sprintf("node %d handed leadership to node %d", s.b.Self(), id)), nil
	}
	lid, addr, err := s.leaderTarget(ctx, "transfer")
	if err != nil {
		return nil, err
	}
	return s.forward(ctx, "transfer", lid, addr, func(ctx context.Context, c electordv1.ElectorClient) (*electordv1.CommandResponse, error) {
		return c.Transfer(ctx, req)
	})
}
