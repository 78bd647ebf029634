package contract

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestContractAndWorkflowsStayOffTheStore: the wire types and the
// workflow code import no Postgres package, so that the run's contract is
// the store's to map, not the other way round.
func TestContractAndWorkflowsStayOffTheStore(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{".", filepath.Join("..", "workflows")} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		require.NotEmpty(t, files, dir)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			require.NoError(t, err)
			for _, imp := range parsed.Imports {
				path, err := strconv.Unquote(imp.Path.Value)
				require.NoError(t, err)
				require.NotContains(t, path, "/internal/store", "%s imports %s", f, path)
			}
		}
	}
}
