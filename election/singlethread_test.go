package election_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestElectionTreeIsSingleThreaded parses every Go file under election/,
// tests included, and fails on a go statement, a t.Parallel call or an
// import of sync or sync/atomic. The race detector reports only accesses
// from two goroutines, so in a tree with one goroutine it can find
// nothing; make test relies on this to run election/... without -race
// (ten times faster on the property schedules). Code that adds concurrency
// here must move election/... back under -race in the Makefile.
func TestElectionTreeIsSingleThreaded(t *testing.T) {
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		checked++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "sync" || p == "sync/atomic" {
				t.Errorf("%s imports %s", fset.Position(imp.Pos()), p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: go statement", fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if n.Sel.Name == "Parallel" {
					t.Errorf("%s: a parallel test", fset.Position(n.Pos()))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("checked only %d files: the walk is wrong", checked)
	}
}
