package client

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/connectivity"

	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// ready waits until ep's connection is up or has failed (an RPC then fails
// at once with the reason), for at most the dial timeout.
func (c *Client) ready(ctx context.Context, ep *endpoint) error {
	dctx, cancel := context.WithTimeout(ctx, c.opts.dialTimeout)
	defer cancel()
	for {
		s := ep.conn.GetState()
		switch s {
		case connectivity.Ready, connectivity.TransientFailure:
			return nil
		case connectivity.Shutdown:
			return ErrClosed
		case connectivity.Idle:
			ep.conn.Connect()
		}
		if !ep.conn.WaitForStateChange(dctx, s) {
			if err := ctx.Err(); err != nil {
				return err
			}
			return fmt.Errorf("no connection within %v", c.opts.dialTimeout)
		}
	}
}

// call runs fn against the first endpoint that answers.
func (c *Client) call(ctx context.Context, fn func(context.Context, electordv1.ElectorClient) error) error {
	var tried []EndpointError
	for _, ep := range c.eps {
		if c.isClosed() {
			return ErrClosed
		}
		err := c.ready(ctx, ep)
		if err == nil {
			err = fn(ctx, ep.api)
			if err == nil || !unreachable(err) {
				return err
			}
		}
		if errors.Is(err, ErrClosed) {
			return ErrClosed
		}
		tried = append(tried, EndpointError{Endpoint: ep.addr, Err: err})
		if ctx.Err() != nil {
			return &NoEndpointError{Tried: tried, Ctx: ctx.Err()}
		}
	}
	return &NoEndpointError{Tried: tried}
}

// Leader returns the leader as the first answering endpoint sees it. No
// known leader is not an error: the result has ID 0 (HasLeader false),
// the last term the node knows and its state.
func (c *Client) Leader(ctx context.Context) (LeaderInfo, error) {
	var li LeaderInfo
	err := c.call(ctx, func(ctx context.Context, api electordv1.ElectorClient) error {
		p, err := api.GetLeader(ctx, &electordv1.GetLeaderRequest{})
		li = leaderFromProto(p)
		return err
	})
	return li, err
}

// IsLeader reports whether the node at the first answering endpoint leads.
// It is meant for a program that runs next to its own electord and gives
// that one endpoint (e.g. New("127.0.0.1:7070")): with several endpoints
// the answer is about whichever node answered.
func (c *Client) IsLeader(ctx context.Context) (bool, error) {
	li, err := c.Leader(ctx)
	return li.Self, err
}

// Status returns the first answering node's view of the cluster.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.call(ctx, func(ctx context.Context, api electordv1.ElectorClient) error {
		p, err := api.Status(ctx, &electordv1.StatusRequest{})
		if err != nil {
			return err
		}
		st = Status{Self: NodeID(p.GetSelfId()), Algorithm: p.GetAlgorithm(), Leader: leaderFromProto(p.GetLeader()), Members: membersFromProto(p.GetMembers()),
			NotStanding: p.GetNotStanding()}
		return nil
	})
	return st, err
}

// Members lists every member the first answering node knows, alive or not.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	var ms []Member
	err := c.call(ctx, func(ctx context.Context, api electordv1.ElectorClient) error {
		p, err := api.Members(ctx, &electordv1.MembersRequest{})
		ms = membersFromProto(p.GetMembers())
		return err
	})
	return ms, err
}

func (c *Client) command(ctx context.Context, fn func(context.Context, electordv1.ElectorClient) (*electordv1.CommandResponse, error)) (CommandResult, error) {
	var res CommandResult
	err := c.call(ctx, func(ctx context.Context, api electordv1.ElectorClient) error {
		p, err := fn(ctx, api)
		if err != nil {
			return err
		}
		res = CommandResult{Message: p.GetMessage(), Leader: leaderFromProto(p.GetLeader())}
		return nil
	})
	return res, err
}

// Kill makes node id crash-stop as its peers see it (its API stays up);
// with exit, its process exits instead. Any endpoint forwards it to id.
// An id that is not a member is NotFound.
//
// Like every command, Kill is sent to the next endpoint only when the
// previous one could not be reached; if a connection breaks after the
// request left, the command may have been carried out before it is sent
// again.
func (c *Client) Kill(ctx context.Context, id NodeID, exit bool) (CommandResult, error) {
	return c.command(ctx, func(ctx context.Context, api electordv1.ElectorClient) (*electordv1.CommandResponse, error) {
		return api.Kill(ctx, &electordv1.KillRequest{Id: uint64(id), Exit: exit})
	})
}

// Revive undoes Kill of node id.
func (c *Client) Revive(ctx context.Context, id NodeID) (CommandResult, error) {
	return c.command(ctx, func(ctx context.Context, api electordv1.ElectorClient) (*electordv1.CommandResponse, error) {
		return api.Revive(ctx, &electordv1.ReviveRequest{Id: uint64(id)})
	})
}

// Resign makes the current leader step down (any endpoint forwards it to
// the leader). With no leader known the error is Unavailable.
func (c *Client) Resign(ctx context.Context) (CommandResult, error) {
	return c.command(ctx, func(ctx context.Context, api electordv1.ElectorClient) (*electordv1.CommandResponse, error) {
		return api.Resign(ctx, &electordv1.ResignRequest{})
	})
}

// Transfer asks the current leader to hand leadership to node id.
func (c *Client) Transfer(ctx context.Context, id NodeID) (CommandResult, error) {
	return c.command(ctx, func(ctx context.Context, api electordv1.ElectorClient) (*electordv1.CommandResponse, error) {
		return api.Transfer(ctx, &electordv1.TransferRequest{Id: uint64(id)})
	})
}

// ElectionInfo is one named election as the answering node sees it.
type ElectionInfo struct {
	Election string     `json:"election"`
	Leader   LeaderInfo `json:"leader"`
	// Candidates: the nodes standing in it.
	Candidates int `json:"candidates"`
	// Local: the apps campaigning in it through the answering node.
	Local int `json:"local_candidacies"`
}

// ElectionLeader is Leader of a named election: any node answers, whether
// or not it stands in the election.
func (c *Client) ElectionLeader(ctx context.Context, election string) (LeaderInfo, error) {
	var li LeaderInfo
	err := c.call(ctx, func(ctx context.Context, api electordv1.ElectorClient) error {
		p, err := api.GetLeader(ctx, &electordv1.GetLeaderRequest{Election: election})
		li = leaderFromProto(p)
		return err
	})
	return li, err
}

// ListElections lists every named election the first answering node
// knows, sorted by name, asking for the largest pages (ListElectionsPage
// pages and filters).
func (c *Client) ListElections(ctx context.Context) ([]ElectionInfo, error) {
	var out []ElectionInfo
	q := ElectionsQuery{PageSize: ElectionsPageMax}
	for {
		p, err := c.ListElectionsPage(ctx, q)
		if err != nil {
			return out, err
		}
		out = append(out, p.Elections...)
		if p.NextPageToken == "" {
			return out, nil
		}
		q.PageToken = p.NextPageToken
	}
}

// ResignElection makes a named election's leading candidacy step down
// (any endpoint forwards it to the node that leads it); its app stays a
// candidate.
func (c *Client) ResignElection(ctx context.Context, election string) (CommandResult, error) {
	return c.command(ctx, func(ctx context.Context, api electordv1.ElectorClient) (*electordv1.CommandResponse, error) {
		return api.Resign(ctx, &electordv1.ResignRequest{Election: election})
	})
}

// TransferElection makes the node that leads a named election hand its
// leadership to node id, which must stand in the election (any endpoint
// forwards it to the leading node). The app that led stays a candidate.
// FailedPrecondition when id does not stand in it or the election has no
// leader; NotFound when id is not a member.
func (c *Client) TransferElection(ctx context.Context, election string, id NodeID) (CommandResult, error) {
	return c.command(ctx, func(ctx context.Context, api electordv1.ElectorClient) (*electordv1.CommandResponse, error) {
		return api.Transfer(ctx, &electordv1.TransferRequest{Election: election, Id: uint64(id)})
	})
}

// Proclaim changes the value of a candidacy on the first answering node
// without an election (candidacy 0: the one that node stands for in the
// election). FailedPrecondition when that node holds no such candidacy.
// A Campaign's own Proclaim reaches its candidacy's node whatever the
// endpoints; this one is for a caller that did not campaign (electctl).
func (c *Client) Proclaim(ctx context.Context, election string, candidacy uint64, value string) (CommandResult, error) {
	return c.command(ctx, func(ctx context.Context, api electordv1.ElectorClient) (*electordv1.CommandResponse, error) {
		return api.Proclaim(ctx, &electordv1.ProclaimRequest{Election: election, Candidacy: candidacy, Value: value})
	})
}
