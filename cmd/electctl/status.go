package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/electord/electord/client"
)

func newStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Print every member: id, name, address, alive, role, term, algorithm",
		Long: `Print the first answering node's view of the cluster: itself, the leader,
and every member with its api address, liveness, role, term and algorithm.
The answering node is marked with *.`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st client.Status
			if err := g.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				st, err = c.Status(ctx)
				return err
			}); err != nil {
				return err
			}
			if g.json() {
				return writeJSON(g.stdout, st)
			}
			fmt.Fprintf(g.stdout, "node %d (%s), leader: %s\n\n", st.Self, st.Algorithm, describe(st.Leader))
			w := table(g.stdout)
			fmt.Fprintln(w, "ID\tNAME\tADDRESS\tALIVE\tROLE\tTERM\tALGORITHM")
			for _, m := range st.Members {
				mark := ""
				if m.ID == st.Self {
					mark = "*"
				}
				fmt.Fprintf(w, "%d%s\t%s\t%s\t%v\t%s\t%s\t%s\n", m.ID, mark, dash(m.Name), dash(m.APIAddr), m.Alive, dash(m.Role), m.Term, dash(m.Algorithm))
			}
			return w.Flush()
		},
	}
}
