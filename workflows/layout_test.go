package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWorkflowCodeStaysWalkable keeps the workflow code as issue 44 left
// it: a run is read stage by stage, so no file of it is over 400 lines
// and no function over 60, and a run's state lives in compactionRun's
// fields, never in workflow context values a reader has to chase.
func TestWorkflowCodeStaysWalkable(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		require.LessOrEqual(t, strings.Count(string(src), "\n"), 400, "%s: over 400 lines", name)
		require.NotContains(t, string(src), "workflow.WithValue", "%s: run state belongs in compactionRun's fields", name)
		f, err := parser.ParseFile(fset, name, src, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			require.LessOrEqual(t, lines, 60, "%s: %s is %d lines", name, fd.Name.Name, lines)
		}
		checked++
	}
	require.GreaterOrEqual(t, checked, 10, "the workflow files were found")
}
