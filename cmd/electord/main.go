// Command electord runs one electord node, or a local cluster (electord dev).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/electord/electord/daemon"
	"github.com/electord/electord/node"
)

// Exit codes.
const (
	exitOK     = 0
	exitError  = 1
	exitConfig = 2 // invalid configuration or flags, TLS material or a gossip key file refused, or a data dir this process cannot write
	exitTerm   = 3 // the term store cannot be trusted: see electord recover-term
)

type configError struct{ error }

func main() {
	root := newRootCmd()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "electord:", err)
		var ce configError
		var dce daemon.ConfigError
		switch {
		case errors.As(err, &ce), errors.As(err, &dce), errors.Is(err, node.ErrDataDirUnwritable):
			os.Exit(exitConfig)
		case errors.Is(err, node.ErrTermStore):
			os.Exit(exitTerm)
		}
		os.Exit(exitError)
	}
}

func newRootCmd() *cobra.Command {
	root := newRunCmd()
	root.AddCommand(newDevCmd(), newVersionCmd(), newRecoverTermCmd(), newCertsCmd(), newPauseCmd())
	return root
}
