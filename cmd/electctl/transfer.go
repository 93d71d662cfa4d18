package main

import (
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
		RunE: g.onNode((*client.Client).Transfer),
	}
}
