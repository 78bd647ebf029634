package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/proxy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// claudeModel plays the model behind the proxy for Claude Code: each
// streamed answer asks for one Bash command that prints a long listing,
// until the last, which ends the task. Claude Code runs the commands and
// sends their output back, so its conversation grows as a real session
// does.
type claudeModel struct {
	steps  int
	mu     sync.Mutex
	calls  int
	bodies [][]byte
	heads  []http.Header
}

func (m *claudeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"type":"error","error":{"type":"not_found_error","message":"not found"}}`)
		return
	}
	m.mu.Lock()
	m.bodies = append(m.bodies, body)
	m.heads = append(m.heads, r.Header.Clone())
	m.calls++
	n := m.calls
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Request-Id", fmt.Sprintf("req_%03d", n))
	ev := func(name, data string) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		w.(http.Flusher).Flush()
	}
	ev("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_%03d","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}}`, n))
	if n > m.steps {
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Task complete."}}`)
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":4}}`)
		ev("message_stop", `{"type":"message_stop"}`)
		return
	}
	input, _ := json.Marshal(map[string]string{"command": fmt.Sprintf("seq %d %d", n*100000, n*100000+1500), "description": "List the next range"})
	partial, _ := json.Marshal(string(input))
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Listing range %d."}}`, n))
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_%03d","name":"Bash","input":{}}}`, n))
	ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":%s}}`, partial))
	ev("content_block_stop", `{"type":"content_block_stop","index":1}`)
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":30}}`)
	ev("message_stop", `{"type":"message_stop"}`)
}

// TestProxyClaudeCode runs Claude Code itself (npm
// @anthropic-ai/claude-code 2.1.197, the last to run on Node 20's
// machines; headless -p, ANTHROPIC_BASE_URL at the proxy, the compactor's
// headers in ANTHROPIC_CUSTOM_HEADERS, a dummy key) through a scripted
// task of a dozen Bash steps whose outputs outgrow the session's limit.
// It needs nothing from the internet (CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC).
// Every request the provider gets is checked as for the SDKs' agents.
// e2e/node/node_modules (bash deploy/test-deps.sh) is required: missing,
// the test fails.
func TestProxyClaudeCode(t *testing.T) {
	t.Parallel()
	bin, err := filepath.Abs("node/node_modules/.bin/claude")
	require.NoError(t, err)
	_, err = os.Stat(bin)
	require.NoError(t, err, "Claude Code is required in e2e/node/node_modules (bash deploy/test-deps.sh)")

	const steps, limit = 12, 40000
	e := newEnv(t, withoutLLM())
	model := &claudeModel{steps: steps}
	upstream := httptest.NewServer(model)
	t.Cleanup(upstream.Close)
	srv, key := proxyServer(t, e, proxy.Config{AnthropicURL: upstream.URL, WaitFor: 2 * time.Minute, Target: proxy.DefaultTarget})

	const task = "List the twelve number ranges one after the other with seq, then say the task is complete."
	work, home := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-p", task, "--output-format", "json", "--allowedTools", "Bash")
	cmd.Dir = work
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"ANTHROPIC_BASE_URL=" + srv.URL + "/proxy/anthropic",
		"ANTHROPIC_API_KEY=sk-ant-agent-dummy",
		"ANTHROPIC_CUSTOM_HEADERS=" + proxy.HeaderKey + ": " + key + "\n" + proxy.HeaderSession + ": claude-code\n" +
			proxy.HeaderContextLimit + ": " + fmt.Sprint(limit),
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1",
		// Claude Code refuses to run as root unless it is told it runs
		// in a sandbox; the test's working folder is its own.
		"IS_SANDBOX=1",
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	require.NoError(t, err, "claude -p failed:\n%s\n%s", out.String(), errOut.String())
	var res struct {
		IsError  bool   `json:"is_error"`
		Result   string `json:"result"`
		NumTurns int    `json:"num_turns"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	require.False(t, res.IsError, out.String())
	require.Equal(t, "Task complete.", res.Result)
	require.Equal(t, steps+1, res.NumTurns)

	counter, err := tokens.New(tokens.EncodingForModel("claude-sonnet-4-5"))
	require.NoError(t, err)
	model.mu.Lock()
	defer model.mu.Unlock()
	require.Len(t, model.bodies, steps+1)
	smaller := 0
	toolsTokens := 0
	for i, body := range model.bodies {
		require.Equal(t, "sk-ant-agent-dummy", model.heads[i].Get("X-Api-Key"), "request %d", i)
		requireUpstreamRequest(t, fmt.Sprintf("request %d", i), body, model.heads[i], conversation.FormatAnthropic, counter, limit,
			task, "sk-ant-agent-dummy")
		var v struct {
			Tools json.RawMessage `json:"tools"`
		}
		require.NoError(t, json.Unmarshal(body, &v))
		toolsTokens = counter.Count(string(v.Tools))
		if i > 0 && len(body) < len(model.bodies[i-1]) {
			smaller++ // compacted: smaller than the request before
		}
	}
	require.Positive(t, smaller, "some requests went upstream compacted")

	runs, err := e.store.ListRuns(context.Background(), store.RunFilter{Tenant: e.tenant, Session: "claude-code"})
	require.NoError(t, err)
	require.NotEmpty(t, runs)
	incremental := 0
	for _, r := range runs {
		require.Equal(t, "proxy", r.Trigger)
		require.NotEqual(t, store.RunFailed, r.Status, r.ID)
		if r.BaseRunID != "" {
			incremental++
		}
	}
	// After the first, the compactions continue the session's line:
	// Claude Code's moved breakpoints and transient reminders do not
	// break it.
	require.Equal(t, len(runs)-1, incremental, "every compaction but the first is incremental on the one before")
	t.Logf("Claude Code: %d turns, %d compactions spliced in, %d runs (%d incremental); its tool definitions alone %d tokens",
		res.NumTurns, smaller, len(runs), incremental, toolsTokens)
}
