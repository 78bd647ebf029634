package testkit_test

import (
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
