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

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// noLeaderJSON is the sidecar's GET /leader body when no leader is known.
type noLeaderJSON struct {
	State string      `json:"state"`
	Term  client.Term `json:"term"`
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

func id(n client.NodeID) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatUint(uint64(n), 10)
}

// describe is a one-line account of a LeaderInfo.
func describe(li client.LeaderInfo) string {
	if !li.HasLeader() {
		return fmt.Sprintf("no leader (term %s, node is %s)", li.Term, li.State)
	}
	return fmt.Sprintf("%d (%s) at %s, term %s", li.ID, li.Name, dash(li.Address), li.Term)
}

// commandOutput prints the result of kill, revive, resign and transfer.
func (g *globals) commandOutput(res client.CommandResult) error {
	if g.json() {
		return writeJSON(g.stdout, res)
	}
	_, err := fmt.Fprintf(g.stdout, "%s\nleader: %s\n", res.Message, describe(res.Leader))
	return err
}
