package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/electord/electord/election/named"
	"github.com/electord/electord/node"
	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// ElectionBackend is the optional Backend feature of named elections
// (docs/ELECTIONS.md), found by type assertion: a Backend without it
// answers the named-election calls with Unimplemented (gRPC) or 501 (HTTP).
// Methods are safe for concurrent use.
type ElectionBackend interface {
	// Campaign stands value in a named election until the candidacy is
	// closed.
	Campaign(ctx context.Context, election, value string, priority int64) (*node.Candidacy, error)
	// NamedElections lists the named elections the node knows.
	NamedElections() []node.ElectionInfo
	// ElectionLeader is a named election's leadership; ok false when the
	// node knows nothing of it.
	ElectionLeader(name string) (li node.LeaderInfo, ok bool)
}

// electionsOf finds b's ElectionBackend, looking through wrappers that
// say what they wrap (Unwrap).
func electionsOf(b Backend) (ElectionBackend, bool) {
	for {
		if e, ok := b.(ElectionBackend); ok {
			return e, true
		}
		u, ok := b.(interface{ Unwrap() Backend })
		if !ok {
			return nil, false
		}
		b = u.Unwrap()
	}
}

// campaignError maps a Campaign refusal to its gRPC status.
func (s *service) campaignError(err error) error {
	switch {
	case errors.Is(err, named.ErrInvalidName), errors.Is(err, named.ErrValueTooLong):
		return grpcstatus.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, node.ErrNamedQuorum):
		return grpcstatus.Error(codes.FailedPrecondition, err.Error())
	}
	return s.statusError(err)
}

// Campaign stands the caller in a named election for as long as the
// stream is open: when the stream ends, whatever ended it, the candidacy
// ends, and a leadership it held is handed over.
func (s *service) Campaign(req *electordv1.CampaignRequest, stream grpc.ServerStreamingServer[electordv1.CampaignEvent]) error {
	eb, ok := electionsOf(s.b)
	if !ok {
		return grpcstatus.Error(codes.Unimplemented, "this node serves no named elections")
	}
	if err := s.killed(); err != nil {
		return err
	}
	ctx := stream.Context()
	c, err := eb.Campaign(ctx, req.GetElection(), req.GetValue(), req.GetPriority())
	if err != nil {
		return s.campaignError(err)
	}
	defer c.Close()
	var seq uint64
	for {
		select {
		case <-ctx.Done():
			return grpcstatus.FromContextError(ctx.Err()).Err()
		case ev, ok := <-c.Events():
			if !ok {
				return s.unavailable("candidacy ended (node stopping)")
			}
			seq++
			li := LeaderToProto(ev.Leader)
			if err := stream.Send(&electordv1.CampaignEvent{Event: ev.Event, Leader: li, Seq: seq, QueuedBehind: uint32(ev.QueuedBehind)}); err != nil {
				return err
			}
		}
	}
}

// ListElections lists the named elections this node knows.
func (s *service) ListElections(context.Context, *electordv1.ListElectionsRequest) (*electordv1.ListElectionsResponse, error) {
	eb, ok := electionsOf(s.b)
	if !ok {
		return nil, grpcstatus.Error(codes.Unimplemented, "this node serves no named elections")
	}
	if err := s.killed(); err != nil {
		return nil, err
	}
	els := eb.NamedElections()
	out := &electordv1.ListElectionsResponse{Elections: make([]*electordv1.ElectionInfo, len(els))}
	for i, e := range els {
		out.Elections[i] = &electordv1.ElectionInfo{Election: e.Election, Leader: LeaderToProto(e.Leader),
			Candidates: uint32(e.Candidates), LocalCandidacies: uint32(e.Local)}
	}
	return out, nil
}

// ---- sidecar HTTP ----

// maxCampaignBody bounds a campaign request's JSON body: a value of at most
// 1 KiB, escaped, and a priority.
const maxCampaignBody = 8 << 10

// CampaignBody is the JSON body of POST /elections/{name}/campaign.
type CampaignBody struct {
	Value    string `json:"value"`
	Priority int64  `json:"priority"`
}

// ElectionsBody is the JSON of GET /elections.
type ElectionsBody struct {
	Elections []node.ElectionInfo `json:"elections"`
}

// serveElections serves /elections and /elections/{name}/...; it reports
// whether the path was one of them.
func (h *httpHandler) serveElections(w http.ResponseWriter, r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, "/elections")
	if !ok || (rest != "" && rest[0] != '/') {
		return false
	}
	eb, ok := electionsOf(h.b)
	if !ok {
		writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "this node serves no named elections"})
		return true
	}
	if rest == "" || rest == "/" {
		if !allow(w, r, http.MethodGet, http.MethodHead) {
			return true
		}
		els := eb.NamedElections()
		if els == nil {
			els = []node.ElectionInfo{}
		}
		writeJSON(w, http.StatusOK, ElectionsBody{Elections: els})
		return true
	}
	name, verb, _ := strings.Cut(rest[1:], "/")
	if err := named.CheckName(name); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return true
	}
	switch verb {
	case "leader":
		if allow(w, r, http.MethodGet, http.MethodHead) {
			li, _ := eb.ElectionLeader(name)
			code, body := leaderJSON(li)
			writeJSON(w, code, body)
		}
	case "campaign":
		if allow(w, r, http.MethodPost) {
			h.campaign(w, r, eb, name)
		}
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found: " + r.URL.Path})
	}
	return true
}

// allow answers 405 with an Allow header unless r's method is one of
// methods.
func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method " + r.Method + " not allowed"})
	return false
}

// campaign holds a candidacy for as long as the request is open, and
// streams its changes as Server-Sent Events named candidate, leader and
// follower, each with the /leader JSON of the election (plus
// "queued_behind"). The candidacy ends when the client goes away (it
// closed the stream, exited, crashed or was killed: the kernel closes its
// socket) or the server shuts down.
func (h *httpHandler) campaign(w http.ResponseWriter, r *http.Request, eb ElectionBackend, name string) {
	var body CampaignBody
	dec := json.NewDecoder(io.LimitReader(r.Body, maxCampaignBody))
	if err := dec.Decode(&body); err != nil && !errors.Is(err, io.EOF) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body: " + err.Error()})
		return
	}
	// Read to the end: only then does the server watch the connection and
	// end the request's context when the client goes away.
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxCampaignBody))
	c, err := eb.Campaign(r.Context(), name, body.Value, body.Priority)
	if err != nil {
		code := http.StatusServiceUnavailable
		if errors.Is(err, named.ErrInvalidName) || errors.Is(err, named.ErrValueTooLong) {
			code = http.StatusBadRequest
		}
		writeJSON(w, code, map[string]string{"error": err.Error()})
		return
	}
	defer c.Close()
	rc := http.NewResponseController(w)
	// The request is read: the stream lasts as long as the client holds
	// it, not ReadTimeout (whose expiry would end it as a closed client).
	_ = rc.SetReadDeadline(time.Time{})
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(p []byte) error {
		_ = rc.SetWriteDeadline(time.Now().Add(httpWriteTimeout))
		if _, err := w.Write(p); err != nil {
			return err
		}
		return rc.Flush()
	}
	tick := time.NewTicker(h.keepAlive)
	defer tick.Stop()
	done := h.done
	if done == nil {
		done = neverDone
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-done:
			return
		case <-tick.C:
			if err := write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
		case ev, ok := <-c.Events():
			if !ok {
				return
			}
			data, err := json.Marshal(campaignEventBody{LeaderBody: LeaderBody{ev.Leader, ev.Leader.Term.String()}, QueuedBehind: ev.QueuedBehind})
			if err != nil {
				return
			}
			if err := write([]byte("event: " + ev.Event + "\ndata: " + string(data) + "\n\n")); err != nil {
				return
			}
		}
	}
}

// campaignEventBody is the data of a campaign event.
type campaignEventBody struct {
	LeaderBody
	QueuedBehind int `json:"queued_behind"`
}
