package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/electord/electord/client"
)

func newResignCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "resign",
		Short: "Make the current leader step down",
		Long: `Make the current leader step down; an election runs without it. Any
endpoint forwards the command to the leader. With no leader known it fails
with exit 3 (unavailable: retry once one is elected).`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res client.CommandResult
			if err := g.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				res, err = c.Resign(ctx)
				return err
			}); err != nil {
				return err
			}
			return g.commandOutput(res)
		},
	}
}
