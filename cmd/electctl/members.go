package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/electord/electord/client"
)

func newMembersCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "members",
		Short: "List the members with their addresses, priority and liveness",
		Args:  exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ms []client.Member
			if err := g.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				ms, err = c.Members(ctx)
				return err
			}); err != nil {
				return err
			}
			if g.json() {
				if ms == nil {
					ms = []client.Member{}
				}
				return writeJSON(g.stdout, membersOut(ms))
			}
			w := table(g.stdout)
			fmt.Fprintln(w, "ID\tNAME\tPRIORITY\tPEER ADDRESS\tAPI ADDRESS\tALIVE\tROLE")
			for _, m := range ms {
				fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%s\t%v\t%s\n", m.ID, dash(m.Name), m.Priority, dash(m.PeerAddr), dash(m.APIAddr), m.Alive, orUnknown(m.Role))
			}
			return w.Flush()
		},
	}
}
