package client

import (
	"context"

	"github.com/electord/electord/election/named"

	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// ElectionsPageMax is the largest page a node answers.
const ElectionsPageMax = named.PageMax

// ElectionsQuery selects a page of named elections, by name. The zero value
// asks for the first page of the default size (100).
type ElectionsQuery struct {
	// PageSize: at most this many (0: the node's default, 100; at most
	// ElectionsPageMax, more is InvalidArgument).
	PageSize int
	// PageToken: the NextPageToken of the previous page (a name: only names
	// that sort after it).
	PageToken string
	// Prefix: only names that start with it.
	Prefix string
	// Leader: only elections led by this node (0: any).
	Leader NodeID
	// Leaderless: only elections with no leader known to the answering
	// node.
	Leaderless bool
}

// ElectionsPage is a page of named elections as the answering node sees them.
type ElectionsPage struct {
	Elections []ElectionInfo `json:"elections"`
	// NextPageToken is the PageToken of the next page; "" on the last.
	NextPageToken string `json:"next,omitempty"`
	// Matched: the elections that pass the query's filters, on every page.
	Matched int `json:"matched"`
	// Total: every named election the answering node knows.
	Total int `json:"total"`
}

// ListElectionsPage lists a page of the named elections the first answering
// node knows. A bad query is InvalidArgument naming the field.
func (c *Client) ListElectionsPage(ctx context.Context, q ElectionsQuery) (ElectionsPage, error) {
	var out ElectionsPage
	err := c.call(ctx, func(ctx context.Context, api electordv1.ElectorClient) error {
		p, err := api.ListElections(ctx, &electordv1.ListElectionsRequest{PageSize: uint32(max(q.PageSize, 0)),
			PageToken: q.PageToken, Prefix: q.Prefix, Leader: uint64(q.Leader), Leaderless: q.Leaderless})
		out = ElectionsPage{NextPageToken: p.GetNextPageToken(), Matched: int(p.GetMatched()), Total: int(p.GetTotal())}
		for _, e := range p.GetElections() {
			out.Elections = append(out.Elections, ElectionInfo{Election: e.GetElection(), Leader: leaderFromProto(e.GetLeader()),
				Candidates: int(e.GetCandidates()), Local: int(e.GetLocalCandidacies())})
		}
		return err
	})
	return out, err
}
