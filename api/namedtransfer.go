package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// transferNamed hands a named election's leadership to node id (which must
// stand in it): here if this node leads the election, else forwarded to the
// node that does, once, as resignNamed is. The target must be a member
// (NotFound otherwise); the leading node refuses a target that does not
// stand in the election (FailedPrecondition, naming both).
func (s *service) transferNamed(ctx context.Context, req *electordv1.TransferRequest) (*electordv1.CommandResponse, error) {
	name := req.GetElection()
	eb, li, err := s.namedLeader(name)
	if err != nil {
		return nil, err
	}
	id := election.NodeID(req.GetId())
	if _, err := s.member(id); err != nil {
		return nil, err
	}
	switch {
	case li.Self && id == s.b.Self():
		return s.reply(fmt.Sprintf("node %d already leads %s", id, name)), nil
	case li.Self:
		if err := eb.TransferElection(ctx, name, id); err != nil {
			return nil, s.statusError(err)
		}
		return s.reply(fmt.Sprintf("node %d handed the leadership of %s to node %d", s.b.Self(), name, id)), nil
	}
	return s.toNamedLeader(ctx, "transfer", li, func(ctx context.Context, c electordv1.ElectorClient) (*electordv1.CommandResponse, error) {
		return c.Transfer(ctx, req)
	})
}

// TransferBody is the JSON body of POST /elections/{name}/transfer.
type TransferBody struct {
	// ID is the node to hand the leadership to; it must stand in the
	// election. The query parameter id may name it instead.
	ID uint64 `json:"id"`
}

// transferNamed: POST /elections/{name}/transfer hands this node's
// leadership of the election to the node the body ({"id": N}) or the query
// (?id=N) names, which must stand in it (200); 400 without a node id, 409
// if this node does not lead the election or the node cannot take it (it
// does not stand in it, is not alive, or preempt would undo it). Like
// resign, it acts on this node only: the sidecar is the local app's, which
// leads through it.
func (h *httpHandler) transferNamed(w http.ResponseWriter, r *http.Request, eb ElectionBackend, name string) {
	var body TransferBody
	if q := r.URL.Query().Get("id"); q != "" {
		id, err := strconv.ParseUint(q, 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "id: " + err.Error()})
			return
		}
		body.ID = id
	} else if err := json.NewDecoder(io.LimitReader(r.Body, maxCampaignBody)).Decode(&body); err != nil && !errors.Is(err, io.EOF) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body: " + err.Error()})
		return
	}
	if body.ID == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `a node id is required: {"id": N} or ?id=N`})
		return
	}
	if err := eb.TransferElection(r.Context(), name, election.NodeID(body.ID)); err != nil {
		code := http.StatusServiceUnavailable
		if errors.Is(err, node.ErrNotLeader) || errors.Is(err, node.ErrNotCandidate) || errors.Is(err, node.ErrNotAlive) ||
			errors.Is(err, node.ErrPreempted) || errors.Is(err, node.ErrUnknownNode) {
			code = http.StatusConflict
		}
		writeJSON(w, code, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"result": fmt.Sprintf("transferred %s to node %d", name, body.ID)})
}
