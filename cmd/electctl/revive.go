package main

import (
	"github.com/spf13/cobra"

	"github.com/electord/electord/client"
)

func newReviveCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revive ID",
		Short: "Undo kill: node ID rejoins from its persisted term",
		Args:  exactArgs(1, "a node ID"),
		RunE:  g.onNode((*client.Client).Revive),
	}
}
