package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/electord/electord/client"
)

// watchJSON is one line of "watch -o json": the /leader fields and the
// stream's sequence number, dropped count and endpoint.
type watchJSON struct {
	leaderJSON
	Seq      uint64 `json:"seq"`
	Dropped  uint64 `json:"dropped"`
	Endpoint string `json:"endpoint"`
}

func newWatchCmd(g *globals) *cobra.Command {
	var (
		count        int
		electionName string
	)
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print each leadership change until Ctrl-C (or --count events)",
		Long: `Print the current leader, then every change, until Ctrl-C or --count events.
With -o json each event is one JSON object per line.

If no endpoint answers at the start, watch fails (exit 3). Once it has
received an event it keeps going when the node goes away: it reconnects to
the first endpoint that answers and resumes from the last term it printed,
noting each break on stderr.`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if count < 0 {
				return usagef("--count %d: must not be negative", count)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			events := c.Watch(ctx)
			if electionName != "" {
				events = c.Observe(ctx, electionName)
			}
			return g.printEvents("watch", events, count)
		},
	}
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many events (0: until Ctrl-C)")
	cmd.Flags().StringVar(&electionName, "election", "", "watch a named election instead of the default one")
	return cmd
}

// printEvents prints events until the channel closes or count have been
// printed (0: no limit). An error before the first event fails (exit 3);
// after it, a break is noted on stderr and the stream resumes.
func (g *globals) printEvents(what string, events <-chan client.Event, count int) error {
	n := 0
	for ev := range events {
		if ev.Err != nil {
			if n == 0 {
				return &runError{ev.Err}
			}
			fmt.Fprintf(g.stderr, "electctl: %s: %s; retrying\n", what, oneLine(ev.Err.Error()))
			continue
		}
		if err := g.printEvent(ev); err != nil {
			return err
		}
		n++
		if count > 0 && n >= count {
			break
		}
	}
	return nil
}

func (g *globals) printEvent(ev client.Event) error {
	if g.json() {
		return json.NewEncoder(g.stdout).Encode(watchJSON{leaderJSON: leaderOut(ev.Leader), Seq: ev.Seq, Dropped: ev.Dropped, Endpoint: ev.Endpoint})
	}
	line := fmt.Sprintf("#%d leader %s; node %s is %s", ev.Seq, describe(ev.Leader), ev.Endpoint, ev.Leader.State)
	if !ev.Leader.HasLeader() {
		line = fmt.Sprintf("#%d no leader known (%s); node %s is %s", ev.Seq, lastTerm(ev.Leader.Term), ev.Endpoint, ev.Leader.State)
	}
	if ev.Resumed {
		line += " (resumed)"
	}
	if ev.Dropped > 0 {
		line += fmt.Sprintf(" (%d changes skipped)", ev.Dropped)
	}
	_, err := fmt.Fprintln(g.stdout, line)
	return err
}
