package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/electord/electord/client"
)

func newKillCmd(g *globals) *cobra.Command {
	var exit bool
	cmd := &cobra.Command{
		Use:   "kill ID",
		Short: "Make node ID crash-stop as its peers see it (--exit: end its process)",
		Long: `Make node ID stop answering its peers and leave gossip, as a crash would;
its process and API stay up, so "electctl revive ID" undoes it. With --exit
the process exits instead (and cannot be revived). Any endpoint forwards
the command to node ID.`,
		Args: exactArgs(1, "a node ID"),
		RunE: g.onNode(func(c *client.Client, ctx context.Context, id client.NodeID) (client.CommandResult, error) {
			return c.Kill(ctx, id, exit)
		}),
	}
	cmd.Flags().BoolVar(&exit, "exit", false, "make the node's process exit")
	return cmd
}
