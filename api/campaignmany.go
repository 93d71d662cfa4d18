package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/electord/electord/election/named"
	"github.com/electord/electord/node"
	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// One stream, many elections (docs/ELECTIONS.md, "Many elections on one
// stream"): the gRPC CampaignMany and the sidecar's POST
// /elections/campaign. Such a stream takes one slot of max-watchers, as
// any campaign or watch stream does: the limit bounds the streams (their
// connections and goroutines); the candidacies on one are bounded by
// node.MaxCampaignElections.

// maxEventsPerSend bounds the events of one CampaignManyResponse, or of one
// write of the sidecar's stream: about 250 bytes each, so a message stays
// far below gRPC's 4 MiB default, and a reader sees the first of many
// changes without waiting for all.
const maxEventsPerSend = 1024

// maxCampaignManyBody bounds POST /elections/campaign's JSON body: the
// longest list of the longest names, quoted and separated, and the rest.
const maxCampaignManyBody = node.MaxCampaignElections*(named.MaxNameLen+3) + maxCampaignBody

// badCampaign reports whether err refuses a campaign for what it asked
// (InvalidArgument, 400), not for the node's state.
func badCampaign(err error) bool {
	for _, e := range []error{named.ErrInvalidName, named.ErrValueTooLong, node.ErrDuplicateElection, node.ErrNoElections,
		node.ErrTooManyElections} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// campaignHTTPCode is the sidecar's status for a refused campaign.
func campaignHTTPCode(err error) int {
	if badCampaign(err) {
		return http.StatusBadRequest
	}
	return http.StatusServiceUnavailable
}

// manyOptions is the candidacies a CampaignMany asks for, one per
// election.
func manyOptions(elections []string, value string, priority int64, placement string) []node.CampaignOptions {
	opts := make([]node.CampaignOptions, len(elections))
	for i, e := range elections {
		opts[i] = node.CampaignOptions{Election: e, Value: value, Priority: priority, Placement: placement}
	}
	return opts
}

// CampaignMany stands the caller in every listed election for as long as
// the stream is open; when it ends, whatever ended it, every candidacy
// ends and each leadership is handed over. Events go out in batches of
// what changed since the last send (each election's newest).
func (s *service) CampaignMany(req *electordv1.CampaignManyRequest, stream grpc.ServerStreamingServer[electordv1.CampaignManyResponse]) error {
	if err := node.CheckPlacement(req.GetPlacement()); err != nil {
		return grpcstatus.Error(codes.InvalidArgument, err.Error())
	}
	eb, release, err := s.namedStream()
	if err != nil {
		return err
	}
	defer release()
	ctx := stream.Context()
	set, err := eb.CampaignMany(ctx, manyOptions(req.GetElections(), req.GetValue(), req.GetPriority(), req.GetPlacement()))
	if err != nil {
		return s.campaignError(err)
	}
	defer set.Close()
	defer s.ownAll(ctx, set.Candidacies())()
	var seq uint64
	var buf []node.CandidacyEvent
	for {
		select {
		case <-ctx.Done():
			return grpcstatus.FromContextError(ctx.Err()).Err()
		case <-set.Done():
			return s.unavailable("candidacies ended")
		case <-set.Ready():
			buf = set.Take(buf[:0], maxEventsPerSend)
			resp := &electordv1.CampaignManyResponse{Events: make([]*electordv1.CampaignEvent, len(buf))}
			for i, ev := range buf {
				seq++
				resp.Events[i] = &electordv1.CampaignEvent{Event: ev.Event, Leader: LeaderToProto(ev.Leader), Seq: seq,
					QueuedBehind: uint32(ev.QueuedBehind), Candidacy: uint64(ev.Candidacy)}
			}
			if err := stream.Send(resp); err != nil {
				return err
			}
		}
	}
}

// openCampaign reads a campaign's JSON body into v (at most limit bytes;
// none is {}), checks its placement and takes a slot of max-watchers,
// which release gives back. On a refusal it has answered (400, or 503
// when the slots are taken) and release is nil.
func (h *httpHandler) openCampaign(w http.ResponseWriter, r *http.Request, v any, limit int64, placement func() string) (release func()) {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if err := json.NewDecoder(r.Body).Decode(v); err != nil && !errors.Is(err, io.EOF) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body: " + err.Error()})
		return nil
	}
	// Read to the end: only then does the server watch the connection and
	// end the request's context when the client goes away.
	_, _ = io.Copy(io.Discard, r.Body)
	if err := node.CheckPlacement(placement()); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return nil
	}
	release, err := streamSlot(h.b)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return nil
	}
	return release
}

// CampaignManyBody is the JSON body of POST /elections/campaign.
type CampaignManyBody struct {
	// Elections lists the elections, no name twice, at most
	// node.MaxCampaignElections.
	Elections []string `json:"elections"`
	Value     string   `json:"value"`
	Priority  int64    `json:"priority"`
	// Placement is "sticky" (the default, also "") or "spread", for every
	// listed election.
	Placement string `json:"placement,omitempty"`
}

// campaignMany: POST /elections/campaign holds one candidacy per listed
// election for as long as the request is open, and streams their changes
// as Server-Sent Events named as a single campaign's (candidate, leader,
// follower), each with that campaign's JSON, whose "election" names the
// election. Many events go out in one write. All the candidacies end when
// the client goes away or the server shuts down.
func (h *httpHandler) campaignMany(w http.ResponseWriter, r *http.Request, eb ElectionBackend) {
	var body CampaignManyBody
	release := h.openCampaign(w, r, &body, maxCampaignManyBody, func() string { return body.Placement })
	if release == nil {
		return
	}
	defer release()
	set, err := eb.CampaignMany(r.Context(), manyOptions(body.Elections, body.Value, body.Priority, body.Placement))
	if err != nil {
		writeJSON(w, campaignHTTPCode(err), map[string]string{"error": err.Error()})
		return
	}
	defer set.Close()
	write := sseStart(w)
	tick := time.NewTicker(h.keepAlive)
	defer tick.Stop()
	done := h.done
	if done == nil {
		done = neverDone
	}
	var buf []node.CandidacyEvent
	var out []byte
	for {
		select {
		case <-r.Context().Done():
			return
		case <-done:
			return
		case <-set.Done():
			return
		case <-tick.C:
			if err := write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
		case <-set.Ready():
			buf = set.Take(buf[:0], maxEventsPerSend)
			out = out[:0]
			for _, ev := range buf {
				data, err := json.Marshal(campaignEventJSON(ev))
				if err != nil {
					return
				}
				out = append(append(append(append(out, "event: "...), ev.Event...), "\ndata: "...), data...)
				out = append(out, "\n\n"...)
			}
			if err := write(out); err != nil {
				return
			}
		}
	}
}
