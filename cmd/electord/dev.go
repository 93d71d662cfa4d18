package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/election/algorithms"
)

func newDevCmd() *cobra.Command {
	var opts devcluster.Options
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local cluster of N real nodes in this process",
		Long: `dev runs N electord nodes on 127.0.0.1 in one process. They talk real gRPC and
real gossip on free ports. It prints each node's addresses and every leader
change as it happens. Try, in a second terminal:

  electctl --endpoints <an api address> status
  electctl --endpoints <an api address> kill <leader id>`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Nodes < 1 || opts.Nodes > 256 {
				return configError{fmt.Errorf("nodes: must be between 1 and 256, got %d", opts.Nodes)}
			}
			out := cmd.OutOrStdout()
			opts.Out = out
			c, err := devcluster.Start(opts)
			if err != nil {
				return err
			}
			defer c.Stop()
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
			<-sigs
			fmt.Fprintln(out, "stopping the cluster")
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.Nodes, "nodes", 5, "how many nodes")
	f.StringVar(&opts.Algorithm, "algorithm", algorithms.Default, strings.Join(algorithms.Names(), " or "))
	f.IntVar(&opts.Quorum, "quorum", 0, "quorum mode with this cluster size (0 = off)")
	f.BoolVar(&opts.Preempt, "preempt", false, "let a higher-ranked node depose a healthy leader")
	f.IntVar(&opts.BasePort, "base-port", 7070, "node i gets api port base+10(i-1), peer +1, gossip +2, http +3 (0: any free ports)")
	f.StringVar(&opts.DataDir, "data-dir", "", "where each node persists its term (default: a temporary directory)")
	f.StringVar(&opts.LogLevel, "log-level", "warn", "node log level")
	return cmd
}
