package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/electord/electord/internal/version"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the module version and VCS revision (also: electord --version)",
		Args:  noArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), version.Read().String("electord"))
		},
	}
}
