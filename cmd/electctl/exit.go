package main

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/client"
)

// Exit codes of electctl (also listed by "electctl --help").
const (
	ExitOK                 = 0 // success
	ExitError              = 1 // any other error
	ExitUsage              = 2 // bad command line: unknown command or flag, wrong arguments
	ExitUnavailable        = 3 // no endpoint answered, or the node cannot act now (e.g. resign with no leader)
	ExitNotFound           = 4 // the node id is not a member
	ExitFailedPrecondition = 5 // the cluster is not in the required state (no leader, a target that cannot lead now, killed)
	ExitDeadline           = 6 // --timeout passed before an answer (resign, transfer: before a new leader was seen)
	ExitPermission         = 7 // the certificate may not make this call (an admin one is needed), or none was given
)

var exitCodes = []struct {
	code int
	text string
}{
	{ExitOK, "success"},
	{ExitError, "any other error"},
	{ExitUsage, "usage: unknown command or flag, wrong arguments"},
	{ExitUnavailable, "unavailable: no endpoint answered, or no leader to forward a command to"},
	{ExitNotFound, "not found: the node id is not a member"},
	{ExitFailedPrecondition, "failed precondition: no leader known (leader), a node that cannot lead now (transfer to a node not alive; resign or transfer that preempt would undo), a transfer that did not hold, node killed"},
	{ExitDeadline, "deadline exceeded: no answer within --timeout (resign, transfer: no new leader seen within it; kill --exit: the node still answers)"},
	{ExitPermission, "permission denied: the call needs another certificate (--cert; kill, revive, resign and transfer need an admin one)"},
}

func exitCodeHelp() string {
	var b strings.Builder
	b.WriteString("Exit codes:\n")
	for _, e := range exitCodes {
		fmt.Fprintf(&b, "  %d  %s\n", e.code, e.text)
	}
	return b.String()
}

// usageError is a bad command line (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// exitError is an outcome with its exit code and message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// runError marks an error returned by a command's RunE, as opposed to one
// cobra found while parsing the command line.
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// classify turns an error into an exit code and a one-line message.
func classify(err error) (int, string) {
	var ue *usageError
	if errors.As(err, &ue) {
		return ExitUsage, ue.msg
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code, ee.msg
	}
	var re *runError
	if !errors.As(err, &re) {
		return ExitUsage, err.Error() // cobra: unknown command or flag
	}
	err = re.err
	var ne *client.NoEndpointError
	if errors.As(err, &ne) {
		return codeOf(status.Code(err)), ne.Error()
	}
	st, ok := status.FromError(err)
	if !ok {
		return ExitError, err.Error()
	}
	if st.Code() == codes.DeadlineExceeded && !strings.Contains(st.Message(), "deadline") {
		// grpc may report the end of --timeout as "stream terminated by RST_STREAM".
		return ExitDeadline, "deadline exceeded: no answer within --timeout (" + st.Message() + ")"
	}
	if st.Code() == codes.Unimplemented {
		return ExitError, "the endpoint does not serve electord's Elector API (is it an electord api-addr?): " + st.Message()
	}
	return codeOf(st.Code()), st.Message()
}

func codeOf(c codes.Code) int {
	switch c {
	case codes.OK:
		return ExitOK
	case codes.Unavailable:
		return ExitUnavailable
	case codes.NotFound:
		return ExitNotFound
	case codes.FailedPrecondition:
		return ExitFailedPrecondition
	case codes.DeadlineExceeded:
		return ExitDeadline
	case codes.InvalidArgument:
		return ExitUsage
	case codes.PermissionDenied, codes.Unauthenticated:
		return ExitPermission
	}
	return ExitError
}
