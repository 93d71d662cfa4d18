package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/electord/electord/client"
)

func newTransferCmd(g *globals) *cobra.Command {
	var electionName string
	cmd := &cobra.Command{
		Use:   "transfer ID",
		Short: "Make the current leader hand leadership to node ID, and check it leads",
		Long: `Make the current leader hand leadership to node ID (any endpoint forwards
the command to the leader). electctl then waits (within --timeout) until the
first answering endpoint sees the next leader, and prints it.

Exit codes: 0 node ID leads now; 3 no leader is known; 4 node ID is not a
member; 5 node ID cannot lead now: it is not alive (killed, stopped, cut
off), or preempt is on and a live node outranks it, so it would depose node
ID at once (the leader refuses), or another node took over after all;
6 no new leader was seen within --timeout.

With --election NAME it hands the leadership of the named election NAME
to node ID, which must stand in it (an app campaigns there through it);
any endpoint forwards the command to the node that leads NAME, and the
app that led stays a candidate. electctl prints the answer and does not
wait: exit 5 when NAME has no leader or node ID does not stand in it.`,
		Args: exactArgs(1, "a node ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			if electionName != "" {
				return g.namedCommand(cmd, func(ctx context.Context, c *client.Client) (client.CommandResult, error) {
					return c.TransferElection(ctx, electionName, id)
				})
			}
			return g.handover(cmd, id, func(c *client.Client, ctx context.Context) (client.CommandResult, error) {
				return c.Transfer(ctx, id)
			})
		},
	}
	cmd.Flags().StringVar(&electionName, "election", "", "hand over a named election's leadership (node ID must stand in it) and print the answer")
	return cmd
}
