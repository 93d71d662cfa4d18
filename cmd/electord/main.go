// Command electord runs one electord node, or a local cluster (electord dev).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK     = 0
	exitError  = 1
	exitConfig = 2 // invalid configuration or flags
)

type configError struct{ error }

func main() {
	root := newRootCmd()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "electord:", err)
		var ce configError
		if errors.As(err, &ce) {
			os.Exit(exitConfig)
		}
		os.Exit(exitError)
	}
}

func newRootCmd() *cobra.Command {
	root := newRunCmd()
	root.AddCommand(newDevCmd(), newVersionCmd())
	return root
}
