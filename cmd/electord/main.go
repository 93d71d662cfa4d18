// Command electord runs one electord node, or a local cluster (electord dev).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/electord/electord/daemon"
	"github.com/electord/electord/internal/version"
	"github.com/electord/electord/node"
)

// Exit codes.
const (
	exitOK     = 0
	exitError  = 1
	exitConfig = 2 // invalid configuration or flags, TLS material or a gossip key file refused, or a data dir this process cannot write
	exitTerm   = 3 // the term store cannot be trusted: see electord recover-term
)

// configError is a configuration or command-line error: exit 2.
type configError struct{ error }

// usageError is a command-line error (a flag, an argument): exit 2 with a
// pointer to the command's --help.
type usageError struct {
	error
	cmd string // "electord", "electord dev", ...
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes electord with args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "electord:", err)
	var ue usageError
	var ce configError
	var dce daemon.ConfigError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", ue.cmd)
		return exitConfig
	case errors.As(err, &ce):
		path := "electord"
		if cmd, _, ferr := root.Find(args); ferr == nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", path)
		return exitConfig
	case errors.As(err, &dce), errors.Is(err, node.ErrDataDirUnwritable):
		return exitConfig
	case errors.Is(err, node.ErrTermStore):
		return exitTerm
	case errors.Is(err, syscall.EADDRINUSE):
		fmt.Fprintln(stderr, busyPortHint(err))
	}
	return exitError
}

func newRootCmd() *cobra.Command {
	root := newRunCmd()
	root.Args = noArgs
	root.AddCommand(newDevCmd(), newVersionCmd(), newRecoverTermCmd(), newCertsCmd())
	// electord --version, the same line as electord version.
	root.Version = version.Read().String("electord")
	root.SetVersionTemplate("{{.Version}}\n")
	// Every subcommand inherits this: a bad flag is exit 2 with a hint.
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{flagError(err), cmd.CommandPath()}
	})
	return root
}

// noArgs is cobra.NoArgs as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		what := "argument"
		if cmd.HasSubCommands() {
			what = "command or argument"
		}
		return usageError{fmt.Errorf("unknown %s %q", what, args[0]), cmd.CommandPath()}
	}
	return nil
}

// flagError rewrites pflag's "invalid argument "-3" for "--id" flag:
// strconv.ParseUint: parsing "-3": invalid syntax" as "--id -3: want a
// whole number (0 or more)".
func flagError(err error) error {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) {
		return err
	}
	want := map[string]string{
		"uint64": "a whole number (0 or more)", "uint": "a whole number (0 or more)", "uint32": "a whole number (0 or more)",
		"int": "an integer", "int64": "an integer", "int32": "an integer",
		"duration": "a duration such as 200ms, 5s or 1m",
		"bool":     "true or false",
	}[ive.GetFlag().Value.Type()]
	if want == "" {
		return err
	}
	if ive.GetFlag().Name == "id" {
		want = "a positive whole number (the node id)"
	}
	return fmt.Errorf("--%s %s: want %s", ive.GetFlag().Name, ive.GetValue(), want)
}

// addrKeys are the keys of the addresses electord binds, as they prefix a
// bind error ("api-addr: listen tcp ...").
var addrKeys = []string{"peer-addr", "api-addr", "http-addr", "health-addr", "gossip-addr"}

// busyPortHint is the advice for a port another process holds.
func busyPortHint(err error) string {
	msg := err.Error()
	key, at := "", len(msg)
	for _, k := range addrKeys {
		if i := strings.Index(msg, k); i >= 0 && i < at {
			key, at = k, i
		}
	}
	if strings.HasPrefix(msg, "node ") { // electord dev: "node 2: api-addr: ..."
		return "hint: another process holds that port (an electord dev still running?); stop it, or pick other ports: " +
			"electord dev --base-port 17070 (node i uses base+10(i-1) to +4), or --base-port 0 for free ones"
	}
	if key == "" {
		return "hint: another process holds that port; stop it, or pick another address"
	}
	return fmt.Sprintf("hint: another process holds that port; stop it, or pick another with --%s (ELECTORD_%s, or %s: in the config file)",
		key, strings.ToUpper(strings.ReplaceAll(key, "-", "_")), key)
}
