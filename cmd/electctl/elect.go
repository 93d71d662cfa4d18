package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/electord/electord/client"
)

// electJSON is one line of "elect -o json": the leadership as the sidecar
// writes it, and the event.
type electJSON struct {
	Event string `json:"event"`
	leaderJSON
	QueuedBehind int `json:"queued_behind,omitempty"`
}

func newElectCmd(g *globals) *cobra.Command {
	var (
		listen    bool
		priority  int64
		placement string
	)
	cmd := &cobra.Command{
		Use:   "elect NAME [VALUE]",
		Short: "Campaign in a named election until Ctrl-C, printing each change",
		Long: `Campaign in the named election NAME with VALUE (say the address your
app serves on) through the first answering endpoint, and print each change:
candidate, leader (with the fencing token), follower (with the leader's
value). The candidacy lasts as long as electctl runs: Ctrl-C or a kill ends
it, and if it led, its node hands the leadership to another candidate.

With --listen it only observes NAME, printing every change of its leader,
as etcdctl elect -l does.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usagef("elect takes NAME and an optional VALUE, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			if listen {
				return g.printEvents("elect --listen", c.Observe(ctx, args[0]), 0)
			}
			value := ""
			if len(args) == 2 {
				value = args[1]
			}
			cp, err := c.Campaign(ctx, args[0], value, client.WithPriority(priority), client.WithPlacement(placement))
			if err != nil {
				return &runError{err}
			}
			defer cp.Close()
			for {
				select {
				case <-ctx.Done():
					return nil
				case ev, ok := <-cp.Events():
					if !ok {
						return &runError{fmt.Errorf("the candidacy ended: %w", cp.Err())}
					}
					if err := g.printCampaign(ev); err != nil {
						return err
					}
				}
			}
		},
	}
	cmd.Flags().BoolVarP(&listen, "listen", "l", false, "observe the election instead of campaigning")
	cmd.Flags().Int64Var(&priority, "priority", 0, "rank of this candidacy's node in the election (higher wins)")
	cmd.Flags().StringVar(&placement, "placement", "", `how the election's candidates are ranked: "sticky" (the default: a leader keeps its leadership) or "spread" (leaderships balanced over the nodes)`)
	return cmd
}

func (g *globals) printCampaign(ev client.CampaignEvent) error {
	if g.json() {
		return json.NewEncoder(g.stdout).Encode(electJSON{Event: ev.Event, leaderJSON: leaderOut(ev.Leader), QueuedBehind: ev.QueuedBehind})
	}
	var line string
	switch {
	case ev.Event == "leader":
		line = fmt.Sprintf("leader: this candidacy leads %s, %s", ev.Leader.Election, termText(ev.Leader.Term))
	case ev.Leader.HasLeader():
		line = fmt.Sprintf("%s: %s leads %s (node %d, %s)", ev.Event, dash(ev.Leader.Value), ev.Leader.Election, ev.Leader.ID, termText(ev.Leader.Term))
	default:
		line = fmt.Sprintf("%s: no leader known in %s", ev.Event, ev.Leader.Election)
	}
	if ev.QueuedBehind > 0 {
		line += fmt.Sprintf(" (queued behind %d on its node)", ev.QueuedBehind)
	}
	_, err := fmt.Fprintln(g.stdout, line)
	return err
}

func newElectionsCmd(g *globals) *cobra.Command {
	var (
		q   client.ElectionsQuery
		all bool
	)
	cmd := &cobra.Command{
		Use:   "elections",
		Short: "List the named elections, their leaders and values, a page at a time",
		Long: `List the named elections the first answering endpoint knows, sorted by
name: the leader's node and value, the term both ways, how many nodes stand,
and how many apps campaign through that endpoint's node.

One page at a time (--limit, 100 by default, at most 1000), then how many
elections match and the command for the next page (--after the last name
shown); --all lists every page. --prefix, --leader ID and --leaderless
keep only the elections whose names start with a prefix, that node ID
leads, or that have no leader known.`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.PageSize < 0 || q.PageSize > client.ElectionsPageMax {
				return usagef("--limit %d: want 1 to %d (0: the node's default, 100)", q.PageSize, client.ElectionsPageMax)
			}
			if all && q.PageSize == 0 {
				q.PageSize = client.ElectionsPageMax
			}
			var p client.ElectionsPage
			if err := g.call(cmd, func(ctx context.Context, c *client.Client) error {
				for {
					next, err := c.ListElectionsPage(ctx, q)
					p.Elections, p.Matched, p.Total, p.NextPageToken = append(p.Elections, next.Elections...), next.Matched, next.Total, next.NextPageToken
					if err != nil || !all || next.NextPageToken == "" {
						return err
					}
					q.PageToken = next.NextPageToken
				}
			}); err != nil {
				return err
			}
			return g.printElections(p)
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.Prefix, "prefix", "", "only elections whose names start with this")
	f.Var(nodeIDFlag{&q.Leader}, "leader", "only elections led by node `ID`")
	f.BoolVar(&q.Leaderless, "leaderless", false, "only elections with no leader known")
	f.IntVar(&q.PageSize, "limit", 0, "at most this many elections (0: the node's default, 100; at most 1000)")
	f.StringVar(&q.PageToken, "after", "", "only elections whose names sort after `NAME` (the next page: the last name shown)")
	f.BoolVar(&all, "all", false, "list every page")
	return cmd
}

// nodeIDFlag is a flag holding a node id, checked as parseID checks one.
type nodeIDFlag struct{ id *client.NodeID }

func (f nodeIDFlag) String() string {
	if f.id == nil || *f.id == 0 {
		return ""
	}
	return fmt.Sprint(*f.id)
}

func (f nodeIDFlag) Set(s string) error {
	id, err := parseID(s)
	if err != nil {
		return err
	}
	*f.id = id
	return nil
}

func (nodeIDFlag) Type() string { return "ID" }

// printElections writes a page of elections: a table, then how many
// matched and how to ask for the next page; or one JSON object with the
// same.
func (g *globals) printElections(p client.ElectionsPage) error {
	if g.json() {
		type electionJSON struct {
			Election   string     `json:"election"`
			Leader     leaderJSON `json:"leader"`
			Candidates int        `json:"candidates"`
			Local      int        `json:"local_candidacies"`
		}
		out := struct {
			Elections []electionJSON `json:"elections"`
			Matched   int            `json:"matched"`
			Total     int            `json:"total"`
			Next      string         `json:"next,omitempty"`
		}{Elections: make([]electionJSON, len(p.Elections)), Matched: p.Matched, Total: p.Total, Next: p.NextPageToken}
		for i, e := range p.Elections {
			out.Elections[i] = electionJSON{e.Election, leaderOut(e.Leader), e.Candidates, e.Local}
		}
		return writeJSON(g.stdout, out)
	}
	w := table(g.stdout)
	fmt.Fprintln(w, "ELECTION\tLEADER\tVALUE\tTERM\tFENCING TOKEN\tCANDIDATES\tLOCAL")
	for _, e := range p.Elections {
		term, token := termCells(e.Leader.Term, e.Leader.HasLeader())
		leader := "none"
		if e.Leader.HasLeader() {
			leader = fmt.Sprint(e.Leader.ID)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", e.Election, leader, dash(e.Leader.Value), term, token, e.Candidates, e.Local)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if p.NextPageToken == "" && len(p.Elections) == p.Total {
		return nil // all of them: nothing to add
	}
	line := fmt.Sprintf("%d shown of %d matching (%d known to the node)", len(p.Elections), p.Matched, p.Total)
	if p.NextPageToken != "" {
		line += "; next page: --after " + p.NextPageToken
	}
	_, err := fmt.Fprintln(g.stdout, line)
	return err
}
