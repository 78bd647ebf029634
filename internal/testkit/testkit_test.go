package testkit_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProductionBinariesLinkNoHarness: worker and starter link no
// package of the test kit or the dev stack, nor the Temporal server.
func TestProductionBinariesLinkNoHarness(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goBin, "list", "-deps", "./worker", "./starter")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/ctxcompact/orchestrator/internal/gateway", "the list is of the product's packages")
	for _, d := range deps {
		require.NotContains(t, d, "/internal/testkit/", "a production binary links %s", d)
		require.NotContains(t, d, "/internal/devkit/", "a production binary links %s", d)
		require.False(t, strings.HasPrefix(d, "go.temporal.io/server"), "a production binary links %s", d)
	}
}

// TestArchitectureNamesEveryPackage: docs/architecture.md's layout, the
// "where the code lives" of a newcomer, names every package of the tree
// (by its folder's name), so that a package added without a line there
// fails here.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(doc), "## Layout\n\n```\n")
	require.True(t, ok, "docs/architecture.md has a ## Layout section with a code block")
	layout, _, ok := strings.Cut(rest, "\n```")
	require.True(t, ok)
	named := map[string]bool{}
	for _, w := range strings.FieldsFunc(layout, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_')
	}) {
		named[w] = true
	}
	seen := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".go") {
			return nil
		}
		dir := filepath.Dir(path)
		if dir == root || seen[dir] {
			return nil
		}
		seen[dir] = true
		rel, _ := filepath.Rel(root, dir)
		require.True(t, named[filepath.Base(dir)], "package %s is not named in docs/architecture.md's layout", rel)
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, len(seen), 40, "the walk found the packages")
}
