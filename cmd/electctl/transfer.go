package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/electord/electord/client"
)

func newTransferCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "transfer ID",
		Short: "Make the current leader hand leadership to node ID, and check it leads",
		Long: `Make the current leader hand leadership to node ID (any endpoint forwards
the command to the leader). electctl then waits (within --timeout) until the
first answering endpoint sees the next leader, and prints it.

Exit codes: 0 node ID leads now; 3 no leader is known; 4 node ID is not a
member; 5 node ID cannot lead now: it is not alive (killed, stopped, cut
off), or preempt is on and a live node outranks it, so it would depose node
ID at once (the leader refuses), or another node took over after all;
6 no new leader was seen within --timeout.`,
		Args: exactArgs(1, "a node ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			return g.handover(cmd, id, func(c *client.Client, ctx context.Context) (client.CommandResult, error) {
				return c.Transfer(ctx, id)
			})
		},
	}
}
