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
		Short: "Make node ID crash-stop as its peers see it (--exit: stop it for good)",
		Long: `Make node ID stop answering its peers and leave gossip, as a crash would;
its process and API stay up, so "electctl revive ID" undoes it. Any endpoint
forwards the command to node ID.

With --exit node ID stops for good instead: it hands leadership over if it
leads, leaves the cluster and closes its ports; electord exits, and in
electord dev that node's daemon stops while the others go on. It cannot be
revived.

Exit codes: 0 done; 3 node ID could not be reached; 4 node ID is not a
member.`,
		Args: exactArgs(1, "a node ID"),
		RunE: g.onNode(func(c *client.Client, ctx context.Context, id client.NodeID) (client.CommandResult, error) {
			return c.Kill(ctx, id, exit)
		}),
	}
	cmd.Flags().BoolVar(&exit, "exit", false, "stop the node for good (its process exits; in electord dev, its daemon stops)")
	return cmd
}
