package e2e

import (
	"net/http"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// TestDevStackKeepsItsDemoKey: the dev stack with the HTTP API prints a
// demo key and COMPACTOR_TENANT; started again on the same folder it
// prints the same key, which still signs in.
func TestDevStackKeepsItsDemoKey(t *testing.T) {
	t.Parallel()
	devBin := buildCommand(t, "cmd/dev")
	dbURL := storetest.NewURL(t)
	dir := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DATABASE_URL=" + dbURL}
	keyRE := regexp.MustCompile(`cck_dev_[0-9a-f]{48}`)
	start := func(name string) (string, string) {
		addr := freeAddr(t)
		p := startWorkerProcess(t, devBin, name, env, "-dir", dir, "-file", "none", "-http", addr)
		readSettings(t, p)
		data, err := os.ReadFile(p.log)
		require.NoError(t, err)
		require.Contains(t, string(data), `export COMPACTOR_TENANT="demo"`)
		key := keyRE.FindString(string(data))
		require.NotEmpty(t, key, "the printed key")
		p.kill()
		return key, addr
	}
	first, _ := start("dev-1")
	second, addr := start("dev-2")
	require.Equal(t, first, second, "the same key after a restart")

	p := startWorkerProcess(t, devBin, "dev-3", env, "-dir", dir, "-file", "none", "-http", addr)
	readSettings(t, p)
	req, err := http.NewRequest("GET", "http://"+addr+"/v1/runs", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+first)
	var resp *http.Response
	require.Eventually(t, func() bool {
		resp, err = http.DefaultClient.Do(req)
		return err == nil
	}, 30*time.Second, 200*time.Millisecond)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the kept key signs in")
}
