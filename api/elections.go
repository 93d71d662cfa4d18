package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/electord/electord/election"
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
	// ListElections lists a page of the named elections the node knows
	// (node.ElectionQuery); an invalid query is its error, naming the
	// field.
	ListElections(q node.ElectionQuery) (node.ElectionsPage, error)
	// CampaignWith is Campaign with every option (placement).
	CampaignWith(ctx context.Context, o node.CampaignOptions) (*node.Candidacy, error)
	// CampaignMany stands a candidacy in each listed election, all held
	// by one set until it is closed.
	CampaignMany(ctx context.Context, opts []node.CampaignOptions) (*node.CandidacySet, error)
	// ElectionLeader is a named election's leadership; ok false when the
	// node knows nothing of it.
	ElectionLeader(name string) (li node.LeaderInfo, ok bool)
	// WatchElection streams a named election's leadership.
	WatchElection(ctx context.Context, name string) (*node.ElectionWatch, error)
	// ResignElection makes this node's candidacy step down if it leads.
	ResignElection(ctx context.Context, name string) error
	// TransferElection hands this node's leadership of a named election to
	// node to, which must stand in it.
	TransferElection(ctx context.Context, name string, to election.NodeID) error
	// Proclaim changes a candidacy's value (id 0: the one this node stands
	// for) without an election.
	Proclaim(ctx context.Context, election string, id named.ID, value string) error
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

// elections is the service's ElectionBackend: Unimplemented without one,
// Unavailable on a killed node.
func (s *service) elections() (ElectionBackend, error) {
	eb, ok := electionsOf(s.b)
	if !ok {
		return nil, grpcstatus.Error(codes.Unimplemented, "this node serves no named elections")
	}
	return eb, s.killed()
}

// campaignError maps a Campaign refusal to its gRPC status.
func (s *service) campaignError(err error) error {
	switch {
	case badCampaign(err):
		return grpcstatus.Error(codes.InvalidArgument, err.Error())
	}
	return s.statusError(err)
}

// Campaign stands the caller in a named election for as long as the
// stream is open: when the stream ends, whatever ended it, the candidacy
// ends, and a leadership it held is handed over.
func (s *service) Campaign(req *electordv1.CampaignRequest, stream grpc.ServerStreamingServer[electordv1.CampaignEvent]) error {
	eb, release, err := s.namedStream()
	if err != nil {
		return err
	}
	defer release()
	ctx := stream.Context()
	if err := node.CheckPlacement(req.GetPlacement()); err != nil {
		return grpcstatus.Error(codes.InvalidArgument, err.Error())
	}
	c, err := eb.CampaignWith(ctx, node.CampaignOptions{Election: req.GetElection(), Value: req.GetValue(), Priority: req.GetPriority(),
		Placement: req.GetPlacement()})
	if err != nil {
		return s.campaignError(err)
	}
	defer c.Close()
	defer s.own(ctx, c)()
	var seq uint64
	return pump(s, ctx, c.Events(), "candidacy", func(ev node.CandidacyEvent) error {
		seq++
		return stream.Send(&electordv1.CampaignEvent{Event: ev.Event, Leader: LeaderToProto(ev.Leader), Seq: seq,
			QueuedBehind: uint32(ev.QueuedBehind), Candidacy: uint64(ev.Candidacy)})
	})
}

// namedStream is the backend and a slot of the watch limit for a named
// election's stream; release gives the slot back.
func (s *service) namedStream() (ElectionBackend, func(), error) {
	eb, err := s.elections()
	if err != nil {
		return nil, nil, err
	}
	release, err := streamSlot(s.b)
	if err != nil {
		return nil, nil, grpcstatus.Error(codes.ResourceExhausted, err.Error())
	}
	return eb, release, nil
}

// pump sends each value of ch with send until the client goes away (its
// context's error), ch closes (the node stops: Unavailable, naming what
// ended) or a send fails.
func pump[T any](s *service, ctx context.Context, ch <-chan T, what string, send func(T) error) error {
	for {
		select {
		case <-ctx.Done():
			return grpcstatus.FromContextError(ctx.Err()).Err()
		case v, ok := <-ch:
			if !ok {
				return s.unavailable(what + " ended (node stopping)")
			}
			if err := send(v); err != nil {
				return err
			}
		}
	}
}

// watchNamed is WatchLeader of a named election: its leadership as this
// node sees it, then every change, with after_term and seq as for the
// default election (no change is counted as dropped: the newest is always
// delivered).
func (s *service) watchNamed(req *electordv1.WatchLeaderRequest, stream grpc.ServerStreamingServer[electordv1.LeaderEvent]) error {
	eb, release, err := s.namedStream()
	if err != nil {
		return err
	}
	defer release()
	ctx := stream.Context()
	w, err := eb.WatchElection(ctx, req.GetElection())
	if err != nil {
		return s.campaignError(err)
	}
	defer w.Close()
	after := req.GetAfterTerm()
	var seq uint64
	return pump(s, ctx, w.C(), "watch", func(li node.LeaderInfo) error {
		if uint64(li.Term) < after {
			return nil
		}
		seq++
		return stream.Send(&electordv1.LeaderEvent{Leader: LeaderToProto(li), Seq: seq})
	})
}

// resignNamed resigns a named election's leadership: here if this node
// leads it, else forwarded to the node that does (as Resign is).
func (s *service) resignNamed(ctx context.Context, req *electordv1.ResignRequest) (*electordv1.CommandResponse, error) {
	name := req.GetElection()
	eb, li, err := s.namedLeader(name)
	if err != nil {
		return nil, err
	}
	if li.Self {
		if err := eb.ResignElection(ctx, name); err != nil {
			return nil, s.statusError(err)
		}
		return s.reply(fmt.Sprintf("node %d resigned the leadership of %s", s.b.Self(), name)), nil
	}
	return s.toNamedLeader(ctx, "resign", li, func(ctx context.Context, c electordv1.ElectorClient) (*electordv1.CommandResponse, error) {
		return c.Resign(ctx, req)
	})
}

// namedLeader is the backend and the leadership of the named election a
// command (resign, transfer) acts on.
func (s *service) namedLeader(name string) (ElectionBackend, node.LeaderInfo, error) {
	eb, err := s.elections()
	if err != nil {
		return nil, node.LeaderInfo{}, err
	}
	if err := named.CheckName(name); err != nil {
		return nil, node.LeaderInfo{}, grpcstatus.Error(codes.InvalidArgument, err.Error())
	}
	li, _ := eb.ElectionLeader(name)
	return eb, li, nil
}

// toNamedLeader forwards a command of li's election, which this node does
// not lead, to the node that does: once (a forwarded command that arrives
// at a node that does not lead is refused, so two nodes that disagree
// cannot bounce it), and not at all when no leader is known.
func (s *service) toNamedLeader(ctx context.Context, what string, li node.LeaderInfo,
	call func(context.Context, electordv1.ElectorClient) (*electordv1.CommandResponse, error),
) (*electordv1.CommandResponse, error) {
	switch {
	case li.ID == 0:
		return nil, grpcstatus.Errorf(codes.FailedPrecondition, "%s has no leader to %s", li.Election, what)
	case forwarded(ctx):
		return nil, grpcstatus.Errorf(codes.FailedPrecondition, "node %d does not lead %s (node %d does)", s.b.Self(), li.Election, li.ID)
	}
	return s.forward(ctx, what+" "+li.Election, li.ID, li.Address, call)
}

// getLeaderNamed is GetLeader of a named election.
func (s *service) getLeaderNamed(name string) (*electordv1.LeaderInfo, error) {
	eb, err := s.elections()
	if err != nil {
		return nil, err
	}
	if err := named.CheckName(name); err != nil {
		return nil, grpcstatus.Error(codes.InvalidArgument, err.Error())
	}
	li, _ := eb.ElectionLeader(name)
	return LeaderToProto(li), nil
}

// Proclaim changes a candidacy's value on this node without an election.
func (s *service) Proclaim(ctx context.Context, req *electordv1.ProclaimRequest) (*electordv1.CommandResponse, error) {
	eb, err := s.elections()
	if err != nil {
		return nil, err
	}
	if err := named.CheckName(req.GetElection()); err != nil {
		return nil, grpcstatus.Error(codes.InvalidArgument, err.Error())
	}
	id, err := s.proclaimable(ctx, req.GetElection(), named.ID(req.GetCandidacy()))
	if err != nil {
		return nil, err
	}
	if err := eb.Proclaim(ctx, req.GetElection(), id, req.GetValue()); err != nil {
		if errors.Is(err, node.ErrNotStanding) {
			return nil, grpcstatus.Error(codes.FailedPrecondition, err.Error())
		}
		return nil, s.campaignError(err)
	}
	return s.reply(fmt.Sprintf("proclaimed in %s", req.GetElection())), nil
}

// ListElections lists a page of the named elections this node knows,
// filtered as the request asks (InvalidArgument naming a bad field).
func (s *service) ListElections(_ context.Context, req *electordv1.ListElectionsRequest) (*electordv1.ListElectionsResponse, error) {
	eb, err := s.elections()
	if err != nil {
		return nil, err
	}
	q := node.ElectionQuery{After: req.GetPageToken(), Prefix: req.GetPrefix(), Leader: election.NodeID(req.GetLeader()),
		Leaderless: req.GetLeaderless(), Limit: int(req.GetPageSize())}
	p, err := eb.ListElections(q)
	if err != nil {
		// The query names its fields as HTTP does; say the request's.
		msg := err.Error()
		for from, to := range map[string]string{"after:": "page_token:", "limit:": "page_size:"} {
			if rest, ok := strings.CutPrefix(msg, from); ok {
				msg = to + rest
			}
		}
		return nil, grpcstatus.Error(codes.InvalidArgument, msg)
	}
	out := &electordv1.ListElectionsResponse{Elections: make([]*electordv1.ElectionInfo, len(p.Elections)),
		NextPageToken: p.Next, Matched: uint32(p.Matched), Total: uint32(p.Total)}
	for i, e := range p.Elections {
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
	// Placement is "sticky" (the default, also "") or "spread".
	Placement string `json:"placement,omitempty"`
}

// ElectionsBody is the JSON of GET /elections: a page of elections by
// name, how many match the query on every page and how many the node
// knows, and the after= of the next page when more match.
type ElectionsBody = node.ElectionsPage

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
	if rest == "/campaign" {
		// Many elections on one stream. (No election's path is this: an
		// election's campaign is /elections/{name}/campaign.)
		if allow(w, r, http.MethodPost) {
			h.campaignMany(w, r, eb)
		}
		return true
	}
	if rest == "" || rest == "/" {
		if !allow(w, r, http.MethodGet, http.MethodHead) {
			return true
		}
		h.listElections(w, r, eb)
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
			li := decided(w, func() node.LeaderInfo { li, _ := eb.ElectionLeader(name); return li })
			code, body := leaderJSON(li)
			writeJSON(w, code, body)
		}
	case "leader/self":
		if allow(w, r, http.MethodGet, http.MethodHead) {
			li := decided(w, func() node.LeaderInfo { li, _ := eb.ElectionLeader(name); return li })
			code, body := selfJSON(li)
			writeJSON(w, code, namedSelfBody{SelfBody: body.(SelfBody), Election: name, Value: li.Value})
		}
	case "watch":
		if allow(w, r, http.MethodGet, http.MethodHead) {
			h.watchNamed(w, r, eb, name)
		}
	case "resign":
		if allow(w, r, http.MethodPost) {
			h.resignNamed(w, r, eb, name)
		}
	case "transfer":
		if allow(w, r, http.MethodPost) {
			h.transferNamed(w, r, eb, name)
		}
	case "proclaim":
		if allow(w, r, http.MethodPost) {
			h.proclaim(w, r, eb, name)
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

// listElections: GET /elections[?after=NAME][&limit=N][&prefix=P]
// [&leader=ID][&leaderless=true] lists a page of the named elections
// (ElectionsBody); 400 naming a bad parameter.
func (h *httpHandler) listElections(w http.ResponseWriter, r *http.Request, eb ElectionBackend) {
	q, err := node.ElectionQueryFromURL(r.URL.Query())
	if err == nil {
		var p ElectionsBody
		if p, err = eb.ListElections(q); err == nil {
			writeJSON(w, http.StatusOK, p)
			return
		}
	}
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
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
	release := h.openCampaign(w, r, &body, maxCampaignBody, func() string { return body.Placement })
	if release == nil {
		return
	}
	defer release()
	c, err := eb.CampaignWith(r.Context(), node.CampaignOptions{Election: name, Value: body.Value, Priority: body.Priority, Placement: body.Placement})
	if err != nil {
		writeJSON(w, campaignHTTPCode(err), map[string]string{"error": err.Error()})
		return
	}
	defer c.Close()
	sseLoop(h, r, sseStart(w), c.Events(), func(ev node.CandidacyEvent) (string, any) {
		return ev.Event, campaignEventJSON(ev)
	})
}

// campaignEventJSON is the data of a campaign event.
func campaignEventJSON(ev node.CandidacyEvent) campaignEventBody {
	return campaignEventBody{LeaderBody: LeaderBody{ev.Leader, ev.Leader.Term.String()}, QueuedBehind: ev.QueuedBehind,
		Candidacy: uint64(ev.Candidacy)}
}

// sseLoop writes each value from ch as a Server-Sent Event (encode names
// it and gives its JSON data; an empty name skips it), and a comment when nothing happened for a
// keep-alive period, until the client goes away, the server shuts down or
// ch is closed.
func sseLoop[T any](h *httpHandler, r *http.Request, write func([]byte) error, ch <-chan T, encode func(T) (string, any)) {
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
		case v, ok := <-ch:
			if !ok {
				return
			}
			if name, body := encode(v); writeEvent(write, name, body) != nil {
				return
			}
		}
	}
}

// writeEvent writes one Server-Sent Event with body as its JSON data; an
// empty name writes nothing (encode found nothing new to say).
func writeEvent(write func([]byte) error, name string, body any) error {
	if name == "" {
		return nil
	}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return write([]byte("event: " + name + "\ndata: " + string(data) + "\n\n"))
}

// ProclaimBody is the JSON body of POST /elections/{name}/proclaim.
type ProclaimBody struct {
	Value string `json:"value"`
	// Candidacy is the campaign event's "candidacy"; 0: the candidacy this
	// node stands for in the election.
	Candidacy uint64 `json:"candidacy"`
}

// proclaim: POST /elections/{name}/proclaim changes a candidacy's value
// without an election (200); 409 if there is no such candidacy here.
func (h *httpHandler) proclaim(w http.ResponseWriter, r *http.Request, eb ElectionBackend, name string) {
	var body ProclaimBody
	if err := json.NewDecoder(io.LimitReader(r.Body, maxCampaignBody)).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body: " + err.Error()})
		return
	}
	if err := eb.Proclaim(r.Context(), name, named.ID(body.Candidacy), body.Value); err != nil {
		code := http.StatusServiceUnavailable
		switch {
		case errors.Is(err, named.ErrValueTooLong):
			code = http.StatusBadRequest
		case errors.Is(err, node.ErrNotStanding):
			code = http.StatusConflict
		}
		writeJSON(w, code, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"result": "proclaimed in " + name})
}

// namedSelfBody is the JSON of /elections/{name}/leader/self: 200 when
// this node's candidacy leads.
type namedSelfBody struct {
	SelfBody
	Election string `json:"election"`
	Value    string `json:"value,omitempty"`
}

// resignNamed: POST /elections/{name}/resign steps this node's candidacy
// down if it leads (200); 409 if it does not.
func (h *httpHandler) resignNamed(w http.ResponseWriter, r *http.Request, eb ElectionBackend, name string) {
	if err := eb.ResignElection(r.Context(), name); err != nil {
		code := http.StatusServiceUnavailable
		if errors.Is(err, node.ErrNotLeader) || errors.Is(err, election.ErrNoCandidate) {
			code = http.StatusConflict
		}
		writeJSON(w, code, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"result": "resigned " + name})
}

// sseStart sets a stream's headers and its deadlines (none for reading:
// the request is read; the stream lasts as long as the client holds it),
// and returns its writer, which renews the write deadline and flushes.
func sseStart(w http.ResponseWriter) func([]byte) error {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return sseWriter(w, rc)
}

// sseWriter writes a stream's bytes: it renews the write deadline (the
// server's WriteTimeout would end the stream otherwise), writes and
// flushes.
func sseWriter(w http.ResponseWriter, rc *http.ResponseController) func([]byte) error {
	return func(p []byte) error {
		_ = rc.SetWriteDeadline(time.Now().Add(httpWriteTimeout))
		if _, err := w.Write(p); err != nil {
			return err
		}
		return rc.Flush()
	}
}

// watchNamed: GET /elections/{name}/watch streams the election's
// leadership as Server-Sent Events named leader, with the
// /elections/{name}/leader JSON, as /watch does for the default election.
func (h *httpHandler) watchNamed(w http.ResponseWriter, r *http.Request, eb ElectionBackend, name string) {
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		return
	}
	release, err := streamSlot(h.b)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	defer release()
	wa, err := eb.WatchElection(r.Context(), name)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	defer wa.Close()
	sseLoop(h, r, sseStart(w), wa.C(), func(li node.LeaderInfo) (string, any) {
		_, body := leaderJSON(li)
		return "leader", body
	})
}

// campaignEventBody is the data of a campaign event.
type campaignEventBody struct {
	LeaderBody
	QueuedBehind int `json:"queued_behind"`
	// Candidacy is the candidacy's id on its node (for proclaim).
	Candidacy uint64 `json:"candidacy"`
}
