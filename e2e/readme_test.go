//go:build linux

// The README test starts the dev stack with the worker-process helpers of
// proc_test.go, which are Linux only.

package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// readmeMaxLines keeps the README an entry point: everything else lives
// under docs/.
const readmeMaxLines = 250

// readmeAPIAddr is the address the README's HTTP flow uses. The test
// serves on a free port instead, so that it never collides with a
// developer's stack, and puts that address wherever the README names this
// one.
const readmeAPIAddr = "127.0.0.1:8080"

// readmeBlock is one fenced block of the README.
type readmeBlock struct {
	lang string
	body string
	line int // 1-based line of the opening fence
}

// readmeBlocks returns the README's fenced blocks, indented ones (inside
// list items) included, with the fence's indentation removed.
func readmeBlocks(t *testing.T, data string) []readmeBlock {
	t.Helper()
	var blocks []readmeBlock
	var cur *readmeBlock
	var indent string
	var body []string
	sc := bufio.NewScanner(strings.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if cur == nil {
			if strings.HasPrefix(trimmed, "```") {
				indent = line[:len(line)-len(trimmed)]
				cur = &readmeBlock{lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), line: n}
				body = nil
			}
			continue
		}
		if trimmed == "```" {
			cur.body = strings.Join(body, "\n")
			blocks = append(blocks, *cur)
			cur = nil
			continue
		}
		body = append(body, strings.TrimPrefix(line, indent))
	}
	require.NoError(t, sc.Err())
	if cur != nil {
		t.Fatalf("README line %d: a fence that is never closed", cur.line)
	}
	return blocks
}

// TestREADME runs every command of the README, so that a newcomer's first
// five minutes work as written. Shell commands live in ```sh blocks, and
// each one is run here, in order, against a dev stack this test starts:
//
//   - `make run` is `go run ./cmd/dev` (the Makefile says so, checked
//     below): the test runs the dev command's binary with no flags in a
//     fresh folder standing for the repository root, so the stack's state
//     goes to its `.devstack`, the default.
//   - the block that starts the stack with the HTTP API runs that binary
//     with the README's flags, in the background, on the same `.devstack`
//     (it runs until the test ends, as it runs until Ctrl-C for a reader).
//   - every other ```sh block runs as one bash script in that folder, as
//     one terminal would, with the `export` lines the stack prints; bash
//     stops at the first command that fails (set -e, pipefail).
//
// A ```console block holds a command that is not run here: only `make
// test` is allowed there, which would run this test again, so the test
// checks that .ci/run runs it and the Makefile has the target instead.
// Any other block language that could hold commands fails the test.
func TestREADME(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	readme := string(raw)
	require.LessOrEqual(t, strings.Count(readme, "\n"), readmeMaxLines, "the README is at most %d lines; move details to docs/", readmeMaxLines)

	var makeRun, stackLine, makeRunOutput string
	var scripts, console []string
	for _, b := range readmeBlocks(t, readme) {
		switch b.lang {
		case "sh":
			cmd := strings.TrimSpace(b.body)
			switch {
			case cmd == "make run":
				require.Empty(t, stackLine, "line %d: `make run` comes before the stack with the HTTP API", b.line)
				makeRun = cmd
			case strings.HasPrefix(cmd, "go run ./cmd/dev "):
				require.NotContains(t, cmd, "\n", "line %d: the stack's block holds its one command only", b.line)
				require.Empty(t, scripts, "line %d: the stack starts before the commands that use it", b.line)
				stackLine = cmd
			default:
				scripts = append(scripts, b.body)
			}
		case "console":
			for _, l := range strings.Split(strings.TrimSpace(b.body), "\n") {
				console = append(console, strings.TrimSpace(l))
			}
		case "text":
			// Output: the first is make run's, whose figures are
			// checked against what it prints below.
			if makeRunOutput == "" {
				makeRunOutput = b.body
			}
		case "python":
			// Client code, not shell commands.
		default:
			t.Fatalf("README line %d: a ```%s block; shell commands go in ```sh (run by this test) or ```console (make test only)", b.line, b.lang)
		}
	}
	require.Equal(t, "make run", makeRun, "the quick start's first command")
	require.NotEmpty(t, stackLine, "the README starts the stack with the HTTP API")
	require.Contains(t, stackLine, "-http "+readmeAPIAddr)
	require.NotEmpty(t, scripts, "the README's HTTP flow")

	// make test: the CI entry point runs it and the Makefile defines it.
	require.Equal(t, []string{"make test"}, console, "the README's commands that are not run here")
	ci, err := os.ReadFile("../.ci/run")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^make test$`, string(ci), ".ci/run runs the README's test command")
	makefile, err := os.ReadFile("../Makefile")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^test:\n\t`, string(makefile), "the Makefile's test target")
	require.Regexp(t, `(?m)^run:\n\tgo run \./cmd/dev\n`, string(makefile), "make run is the dev command with its defaults, which this test runs")

	dev := buildCommand(t, "cmd/dev")
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	work := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(root, "testdata"), filepath.Join(work, "testdata")))
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DATABASE_URL=" + storetest.NewURL(t)}

	// make run: the demo compacts the sample and exits.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, dev)
	cmd.Dir, cmd.Env = work, env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make run:\n%s", out)
	require.Contains(t, string(out), "before ", "make run prints the size before")
	require.Contains(t, string(out), "after ", "and after")
	require.Contains(t, string(out), "archive  tenants/demo/archive/", "and where the original is archived")
	// Every line the README quotes is what make run prints, its figures
	// included (a line ending in … is compared up to it).
	require.NotEmpty(t, makeRunOutput, "the README quotes make run's output in a ```text block")
	for _, line := range strings.Split(makeRunOutput, "\n") {
		want := strings.TrimRight(strings.TrimSuffix(strings.TrimRight(line, " "), "…"), " ")
		if strings.TrimSpace(want) == "" {
			continue
		}
		require.Contains(t, string(out), want, "README.md quotes a line make run no longer prints; what it prints now, to paste:\n%s", out)
	}

	// The stack with the HTTP API, on a free port, on make run's folder.
	addr := freeAddr(t)
	args := strings.Fields(strings.ReplaceAll(strings.TrimPrefix(stackLine, "go run ./cmd/dev "), readmeAPIAddr, addr))
	stack := startWorkerProcess(t, dev, "readme-stack", env, append([]string{"-dir", filepath.Join(work, ".devstack")}, args...)...)
	settings := readSettings(t, stack)
	require.Contains(t, settings, "COMPACTOR_TENANT=demo", "the stack prints the demo tenant's settings")
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 200*time.Millisecond, "the stack's API is ready")

	// The rest, as one terminal.
	script := "set -euxo pipefail\n" + strings.ReplaceAll(strings.Join(scripts, "\n"), readmeAPIAddr, addr)
	// The commands run outside the repository: `go run ./PKG` runs PKG
	// built from this checkout.
	script = goRunPattern.ReplaceAllStringFunc(script, func(m string) string {
		return buildCommand(t, goRunPattern.FindStringSubmatch(m)[1])
	})
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer scancel()
	sh := exec.CommandContext(sctx, "bash", "-c", script)
	sh.Dir, sh.Env = work, append(append([]string{}, env...), settings...)
	var stdout strings.Builder
	var stderr strings.Builder
	sh.Stdout, sh.Stderr = &stdout, &stderr
	require.NoError(t, sh.Run(), "the README's commands; trace:\n%s\noutput:\n%s", stderr.String(), stdout.String())
	stack.checkAlive()
	shown := stdout.String()
	require.Regexp(t, `recovered [1-9][0-9]* offloads`, shown, "the offline example agent recovered its offloaded log")

	// The flow did what the README says: the run succeeded, the output was
	// fetched and names the offload, and the offload reads back as the
	// original tool result, byte for byte.
	require.Contains(t, shown, `"status": "succeeded"`, "the waited-for run")
	var accepted struct {
		RunID string `json:"run_id"`
	}
	readJSON(t, filepath.Join(work, "accepted.json"), &accepted)
	require.NotEmpty(t, accepted.RunID, "the event's answer names its run")

	original, err := os.ReadFile(filepath.Join(work, "testdata/conversations/django__django-11742.json"))
	require.NoError(t, err)
	compacted, err := os.ReadFile(filepath.Join(work, "compacted.json"))
	require.NoError(t, err)
	require.True(t, json.Valid(compacted), "the fetched output is JSON")
	require.Less(t, len(compacted), len(original), "the output is smaller than the original")

	recovered, err := os.ReadFile(filepath.Join(work, "recovered.txt"))
	require.NoError(t, err)
	require.NotEmpty(t, recovered, "the recovered offload")
	id := regexp.MustCompile(`Recover the full content with the recover_context tool, id: ([0-9a-f]{64})`).FindStringSubmatch(shown)
	require.NotNil(t, id, "grep printed the offload's reference")
	require.Contains(t, shown, "recovered.txt", "wc printed the recovered size")
	require.Contains(t, string(compacted), id[1], "the output names the offload")
	sum := sha256.Sum256(recovered)
	require.Equal(t, id[1], hex.EncodeToString(sum[:]), "the recovered offload is the one the output names (its id is its SHA-256)")
	var conv struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(original, &conv))
	found := false
	for _, m := range conv.Messages {
		if m.Role == "tool" && m.Content == string(recovered) {
			found = true
		}
	}
	require.True(t, found, "the recovered offload (%d bytes) is a tool result of the original, byte for byte", len(recovered))

	require.Contains(t, shown, "whsec_", "the webhook's answer carries its secret")
}

// readJSON decodes the JSON file at path into v.
func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, v), "%s: %s", path, data)
}

// goRunPattern is a `go run ./PKG` in a README command.
var goRunPattern = regexp.MustCompile(`go run \./([A-Za-z0-9_/]+)`)
