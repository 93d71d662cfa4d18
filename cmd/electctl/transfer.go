package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/electord/electord/client"
)

func newTransferCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "transfer ID",
		Short: "Make the current leader hand leadership to node ID",
		Long: `Make the current leader hand leadership to node ID (any endpoint forwards
the command to the leader). Node ID must be a live member (exit 4 if it is
not a member, 5 if it cannot lead now).`,
		Args: exactArgs(1, "a node ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			nid, err := parseID(args[0])
			if err != nil {
				return err
			}
			var res client.CommandResult
			if err := g.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				res, err = c.Transfer(ctx, nid)
				return err
			}); err != nil {
				return err
			}
			return g.commandOutput(res)
		},
	}
}
