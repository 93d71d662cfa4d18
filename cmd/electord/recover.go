package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
)

func newRecoverTermCmd() *cobra.Command {
	var dir, atLeast string
	cmd := &cobra.Command{
		Use:   "recover-term --data-dir DIR --at-least TERM",
		Short: "Rewrite a damaged or lost term file; it can only raise the term",
		Long: `recover-term is the way out when electord refuses to start because its
term file is truncated, corrupt, unreadable or gone (exit code 3). Give it
a term at least as high as any the cluster used: the highest term another
node reports (electctl status), as epoch.slot (58.3) or as the integer
fencing token. A readable file is only ever raised, never lowered. An
intact leader file is kept: its leadership term is one the node saw, so
the term written is at least that term, even above --at-least.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" || atLeast == "" {
				return configError{fmt.Errorf("recover-term: --data-dir and --at-least are required")}
			}
			t, err := parseTerm(atLeast)
			if err != nil {
				return configError{fmt.Errorf("recover-term: --at-least: %w", err)}
			}
			old, now, err := node.RecoverTerm(dir, t)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: term %v (was %v), last leadership %v", dir, now.Term, old.Term, now.LeaderTerm)
			if now.Term > max(t, old.Term) {
				// Only the leader file's leadership term raises the term
				// above both: the operator's term was below a term this
				// node saw.
				fmt.Fprintf(cmd.OutOrStdout(), "; the term is raised above --at-least %v to the leadership term the leader file kept", t)
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "data-dir", "", "the node's data dir")
	cmd.Flags().StringVar(&atLeast, "at-least", "", "the lowest term to start from: epoch.slot (58.3) or the integer token")
	return cmd
}

// parseTerm reads epoch.slot or the integer fencing token.
func parseTerm(s string) (election.Term, error) {
	if e, sl, ok := strings.Cut(s, "."); ok {
		epoch, err1 := strconv.ParseUint(e, 10, 64)
		slot, err2 := strconv.ParseUint(sl, 10, 64)
		if err1 != nil || err2 != nil || slot >= 1<<election.SlotBits || epoch > election.MaxConfigEpoch {
			return 0, fmt.Errorf("%q is not a term (epoch.slot, slot below %d, epoch at most %d)", s, 1<<election.SlotBits, uint64(election.MaxConfigEpoch))
		}
		return election.Term(epoch<<election.SlotBits | slot), nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a term (epoch.slot or an integer)", s)
	}
	return election.Term(v), nil
}
