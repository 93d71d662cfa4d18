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
and every member with its api address, liveness, role, term (TERM for
people, FENCING TOKEN for programs) and algorithm. The answering node is
marked with *. A member whose role or term the node does not know (it knows
no leader, or the member is down) shows "unknown".`,
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
				return writeJSON(g.stdout, statusJSON{Self: st.Self, Algorithm: st.Algorithm, Leader: leaderOut(st.Leader), Members: membersOut(st.Members),
					NotStanding: st.NotStanding})
			}
			fmt.Fprintf(g.stdout, "node %d (%s), leader: %s\n", st.Self, st.Algorithm, describe(st.Leader))
			if st.NotStanding != "" {
				fmt.Fprintf(g.stdout, "node %d does not stand: %s\n", st.Self, st.NotStanding)
			}
			fmt.Fprintln(g.stdout)
			w := table(g.stdout)
			fmt.Fprintln(w, "ID\tNAME\tADDRESS\tALIVE\tROLE\tTERM\tFENCING TOKEN\tALGORITHM")
			for _, m := range st.Members {
				mark := ""
				if m.ID == st.Self {
					mark = "*"
				}
				term, token := termCells(m.Term, m.Role != "" && m.Role != client.StateNoLeader)
				fmt.Fprintf(w, "%d%s\t%s\t%s\t%v\t%s\t%s\t%s\t%s\n", m.ID, mark, dash(m.Name), dash(m.APIAddr), m.Alive, orUnknown(m.Role), term, token, dash(m.Algorithm))
			}
			return w.Flush()
		},
	}
}
