package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/electord/electord/client"
)

func newProclaimCmd(g *globals) *cobra.Command {
	var candidacy uint64
	cmd := &cobra.Command{
		Use:   "proclaim NAME VALUE",
		Short: "Change a candidacy's value in a named election without an election",
		Long: `Change the value of a candidacy in the named election NAME to VALUE
without an election (etcd's proclaim): if it leads, everyone sees the new
value with the same leader and fencing token. The candidacy is on the first
answering endpoint: the one that node stands for in NAME (the head of its
queue), or the one --candidacy names (a campaign event's "candidacy").

Exit codes: 0 proclaimed; 2 a bad name or a value over 1 KiB; 5 the
answering node holds no such candidacy in NAME.`,
		Args: exactArgs(2, "NAME and VALUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.namedCommand(cmd, func(ctx context.Context, c *client.Client) (client.CommandResult, error) {
				return c.Proclaim(ctx, args[0], candidacy, args[1])
			})
		},
	}
	cmd.Flags().Uint64Var(&candidacy, "candidacy", 0, "the candidacy's id on the answering node (0: the one it stands for in NAME)")
	return cmd
}
