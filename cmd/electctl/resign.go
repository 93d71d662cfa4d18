package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/electord/electord/client"
)

func newResignCmd(g *globals) *cobra.Command {
	var electionName string
	cmd := &cobra.Command{
		Use:   "resign",
		Short: "Make the current leader step down, and say who leads after",
		Long: `Make the current leader step down; an election runs without it. Any
endpoint forwards the command to the leader. electctl then waits (within
--timeout) until the first answering endpoint sees the next leader, and
prints it.

Exit codes: 0 the leader resigned and another leads now; 3 no leader is
known (retry once one is elected); 5 the leader refused: no other node can
lead, or preempt is on and the leader outranks every live node, so it would
take leadership back at once (stop it instead: SIGTERM hands over), or
the same node led again after the election; 6 it
resigned but no new leader was seen within --timeout.`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if electionName != "" {
				return g.namedCommand(cmd, func(ctx context.Context, c *client.Client) (client.CommandResult, error) {
					return c.ResignElection(ctx, electionName)
				})
			}
			return g.handover(cmd, 0, (*client.Client).Resign)
		},
	}
	cmd.Flags().StringVar(&electionName, "election", "", "resign a named election's leadership (its app stays a candidate) and print the answer")
	return cmd
}
