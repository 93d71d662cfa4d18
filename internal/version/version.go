// Package version describes the running binary from its build info
// (runtime/debug): the module version and the VCS revision Go stamps into
// binaries built in a checkout (go build -buildvcs=true, the default
// outside CI; this repository's CI sets GOFLAGS=-buildvcs=false, and then
// the revision is unknown).
package version

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Info is what the build info says about the binary.
type Info struct {
	Module    string // the main module's version: a tag, a pseudo-version, or "(devel)"
	Revision  string // the VCS commit, "" when not stamped
	Time      string // the commit's time (RFC 3339), "" when not stamped
	Modified  bool   // the work tree had uncommitted changes
	GoVersion string
}

// Read returns the binary's Info.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Module: "(devel)"}
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Module: bi.Main.Version, GoVersion: bi.GoVersion}
	if in.Module == "" {
		in.Module = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the one line "electord version" prints:
//
//	electord v0.0.0-20261123040410-89eb02206457+dirty, revision 89eb02206457... (2026-11-23T04:04:10Z, modified), go1.26.8
func (in Info) String(program string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s, ", program, in.Module)
	if in.Revision == "" {
		b.WriteString("revision unknown (built without VCS information: go build -buildvcs=true stamps it)")
	} else {
		fmt.Fprintf(&b, "revision %s", in.Revision)
		var notes []string
		if in.Time != "" {
			notes = append(notes, in.Time)
		}
		if in.Modified {
			notes = append(notes, "modified")
		}
		if len(notes) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(notes, ", "))
		}
	}
	if in.GoVersion != "" {
		fmt.Fprintf(&b, ", %s", in.GoVersion)
	}
	return b.String()
}
