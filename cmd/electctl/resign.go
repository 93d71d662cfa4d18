package main

import (
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
			return g.command(cmd, (*client.Client).Resign)
		},
	}
}
