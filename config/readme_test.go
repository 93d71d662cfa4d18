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

// configDoc is the document that holds the configuration table, relative to
// this package's directory.
const configDoc = "../docs/CONFIGURATION.md"

// configDocTable returns the rows of the configuration table in configDoc (its
// "## Keys" section): key → default cell.
func configDocTable(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Keys\n")
	if !ok {
		t.Fatal(configDoc + " has no ## Keys section")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	row := regexp.MustCompile("^\\| `([a-z0-9-]+)` \\| ([^|]*) \\|")
	rows := map[string]string{}
	for _, line := range strings.Split(sec, "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			if _, dup := rows[m[1]]; dup {
				t.Errorf(configDoc+": key %s twice in the configuration table", m[1])
			}
			rows[m[1]] = strings.TrimSpace(m[2])
		}
	}
	if len(rows) == 0 {
		t.Fatal(configDoc + ": no rows in the configuration table")
	}
	return rows
}

// The documented configuration table lists exactly the keys Register
// defines, so a new flag cannot ship undocumented, and a default written as
// one `value` is the flag's default.
func TestConfigurationDocTableMatchesFlags(t *testing.T) {
	rows := configDocTable(t)
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
			t.Errorf(configDoc+": the configuration table lacks `%s` (%s)", f.Name, f.Usage)
			return
		}
		if v, lit := strings.CutPrefix(def, "`"); lit && strings.Count(def, "`") == 2 && strings.HasSuffix(v, "`") {
			v = strings.TrimSuffix(v, "`")
			if d, err := time.ParseDuration(v); err == nil && f.Value.Type() == "duration" {
				v = d.String()
			}
			if v != f.DefValue && f.DefValue != "" {
				t.Errorf(configDoc+": `%s` defaults to %q in the table, %q in the flag", f.Name, v, f.DefValue)
			}
		}
	})
	for k := range rows {
		if !slices.Contains(flags, k) {
			t.Errorf(configDoc+": the configuration table has `%s`, which is no flag", k)
		}
	}
}
