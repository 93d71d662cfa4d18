package config

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// readmeTable returns the rows of the README's configuration table: key →
// default cell.
func readmeTable(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Configuration\n")
	if !ok {
		t.Fatal("README.md has no ## Configuration section")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	row := regexp.MustCompile("^\\| `([a-z0-9-]+)` \\| ([^|]*) \\|")
	rows := map[string]string{}
	for _, line := range strings.Split(sec, "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			if _, dup := rows[m[1]]; dup {
				t.Errorf("README: key %s twice in the configuration table", m[1])
			}
			rows[m[1]] = strings.TrimSpace(m[2])
		}
	}
	if len(rows) == 0 {
		t.Fatal("README: no rows in the configuration table")
	}
	return rows
}

// The README's configuration table lists exactly the keys Register defines
// (issue 14: id-from-hostname and the issue 13/14 keys were missing), and a
// default written as one `value` is the flag's default.
func TestReadmeConfigurationTableMatchesFlags(t *testing.T) {
	rows := readmeTable(t)
	fs := pflag.NewFlagSet("electord", pflag.ContinueOnError)
	Register(fs)
	var flags []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == "config" { // the file itself, described above the table
			return
		}
		flags = append(flags, f.Name)
		def, ok := rows[f.Name]
		if !ok {
			t.Errorf("README: the configuration table lacks `%s` (%s)", f.Name, f.Usage)
			return
		}
		if v, lit := strings.CutPrefix(def, "`"); lit && strings.Count(def, "`") == 2 && strings.HasSuffix(v, "`") {
			v = strings.TrimSuffix(v, "`")
			if d, err := time.ParseDuration(v); err == nil && f.Value.Type() == "duration" {
				v = d.String()
			}
			if v != f.DefValue && f.DefValue != "" {
				t.Errorf("README: `%s` defaults to %q in the table, %q in the flag", f.Name, v, f.DefValue)
			}
		}
	})
	for k := range rows {
		if !slices.Contains(flags, k) {
			t.Errorf("README: the configuration table has `%s`, which is no flag", k)
		}
	}
}
