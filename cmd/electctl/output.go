package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/electord/electord/client"
)

// One way to write a term: for people epoch.slot ("21.5", the election
// epoch and the leader's slot), for programs the integer fencing token
// (1376261), each labelled wherever it is printed:
//
//	text    term 21.5 (fencing token 1376261)
//	tables  TERM 21.5, FENCING TOKEN 1376261
//	JSON    "term": 1376261, "term_epoch_slot": "21.5" (as the sidecar's /leader)

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// termText is a term in text: "term 21.5 (fencing token 1376261)".
func termText(t client.Term) string {
	return fmt.Sprintf("term %v (fencing token %d)", t, uint64(t))
}

// lastTerm is the term a node with no leader reports: the last leadership
// it knew, if any.
func lastTerm(t client.Term) string {
	if t == 0 {
		return "no leadership known yet"
	}
	return "last leadership " + termText(t)
}

// termCells are a term's TERM and FENCING TOKEN cells; known false (no
// leadership known) prints "unknown" rather than a 0.0 that looks like a
// value.
func termCells(t client.Term, known bool) (string, string) {
	if !known || t == 0 {
		return "unknown", "unknown"
	}
	return t.String(), strconv.FormatUint(uint64(t), 10)
}

// leaderJSON is a LeaderInfo as the sidecar's GET /leader writes it: the
// term as the integer fencing token and as epoch.slot.
type leaderJSON struct {
	client.LeaderInfo
	TermEpochSlot string `json:"term_epoch_slot"`
}

func leaderOut(li client.LeaderInfo) leaderJSON {
	return leaderJSON{li, li.Term.String()}
}

// noLeaderJSON is the sidecar's GET /leader body when no leader is known.
type noLeaderJSON struct {
	State         string      `json:"state"`
	Term          client.Term `json:"term"`
	TermEpochSlot string      `json:"term_epoch_slot"`
}

type memberJSON struct {
	client.Member
	TermEpochSlot string `json:"term_epoch_slot"`
}

func membersOut(ms []client.Member) []memberJSON {
	out := make([]memberJSON, len(ms))
	for i, m := range ms {
		out[i] = memberJSON{m, m.Term.String()}
	}
	return out
}

type statusJSON struct {
	Self      client.NodeID `json:"self_id"`
	Algorithm string        `json:"algorithm"`
	Leader    leaderJSON    `json:"leader"`
	Members   []memberJSON  `json:"members"`
	// NotStanding: why the answering node is no candidate ("" while it is).
	NotStanding string `json:"not_standing,omitempty"`
}

// commandJSON is the answer of kill, revive, resign and transfer: what
// happened, and the leader as the answering node sees it after (for resign
// and transfer, the new leader once known).
type commandJSON struct {
	Message string     `json:"message"`
	Leader  leaderJSON `json:"leader"`
}

func since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// describe is a one-line account of a LeaderInfo.
func describe(li client.LeaderInfo) string {
	if !li.HasLeader() {
		return fmt.Sprintf("none known (node is %s; %s)", li.State, lastTerm(li.Term))
	}
	return fmt.Sprintf("%d (%s) at %s, %s", li.ID, dash(li.Name), dash(li.Address), termText(li.Term))
}

// commandOutput prints the result of kill, revive, resign and transfer.
func (g *globals) commandOutput(msg string, leader client.LeaderInfo) error {
	if g.json() {
		return writeJSON(g.stdout, commandJSON{Message: msg, Leader: leaderOut(leader)})
	}
	_, err := fmt.Fprintln(g.stdout, msg)
	return err
}
