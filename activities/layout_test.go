package activities

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestActivityFilesStayShort: each file of the steps holds one concern and
// stays at most 300 lines (the run contract's bound), so that a step is
// read in one sitting; a file that outgrows it is split by what it holds
// (commit.go became commit, output and figures; history.go gave its
// session log to sessionlog.go).
func TestActivityFilesStayShort(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		require.LessOrEqual(t, strings.Count(string(src), "\n"), 300, "%s: over 300 lines", name)
		checked++
	}
	require.GreaterOrEqual(t, checked, 20, "the step files were found")
}
