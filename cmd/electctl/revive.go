package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/electord/electord/client"
)

func newReviveCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revive ID",
		Short: "Undo kill: node ID rejoins from its persisted term",
		Args:  exactArgs(1, "a node ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			nid, err := parseID(args[0])
			if err != nil {
				return err
			}
			var res client.CommandResult
			if err := g.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				res, err = c.Revive(ctx, nid)
				return err
			}); err != nil {
				return err
			}
			return g.commandOutput(res)
		},
	}
}
