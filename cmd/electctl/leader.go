package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/electord/electord/client"
)

func newLeaderCmd(g *globals) *cobra.Command {
	var electionName string
	cmd := &cobra.Command{
		Use:   "leader",
		Short: "Print the current leader",
		Long: `Print the leader as the first answering endpoint sees it, with its term
written both ways: TERM (epoch.slot, for people) and FENCING TOKEN (the same
term as an integer, for programs). With -o json the object has the fields of
the sidecar's GET /leader: id, name, address, term (the fencing token),
term_epoch_slot, since, self, state. With no leader known it prints
{"state":"no_leader","term":N,"term_epoch_slot":"E.S"} (the last leadership
the node knew) and exits 5.`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var li client.LeaderInfo
			if err := g.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				if electionName != "" {
					li, err = c.ElectionLeader(ctx, electionName)
				} else {
					li, err = c.Leader(ctx)
				}
				return err
			}); err != nil {
				return err
			}
			if !li.HasLeader() {
				if g.json() {
					if err := writeJSON(g.stdout, noLeaderJSON{State: client.StateNoLeader, Term: li.Term, TermEpochSlot: li.Term.String()}); err != nil {
						return err
					}
				}
				return &exitError{ExitFailedPrecondition, fmt.Sprintf("no leader known (node is %s; %s)", li.State, lastTerm(li.Term))}
			}
			if g.json() {
				return writeJSON(g.stdout, leaderOut(li))
			}
			term, token := termCells(li.Term, true)
			w := table(g.stdout)
			fmt.Fprintln(w, "ID\tNAME\tADDRESS\tTERM\tFENCING TOKEN\tSINCE\tSELF\tSTATE")
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%v\t%s\n", li.ID, dash(li.Name), dash(li.Address), term, token, since(li.Since), li.Self, li.State)
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&electionName, "election", "", "a named election's leader (its value in -o json) instead of the default election's")
	return cmd
}
