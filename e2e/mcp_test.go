package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/httpapi"
	"github.com/ctxcompact/orchestrator/internal/mcp"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// The MCP server (issue 22, item 1) on the real stack: over streamable
// HTTP behind the API's bearer keys (Go SDK client and the official
// TypeScript SDK's), and over stdio as `starter mcp`.

// mcpConversation is a real agent conversation that a three-tier
// checkpoint with mcpLimit summarizes, so that its output names ids to
// recover.
const (
	mcpConversation = "swe-agent-deepseek/django__django-12308.json"
	mcpLimit        = 20000
	mcpPreset       = "three-tier"
)

// mcpEnv is an env with the API (and /mcp) served over HTTP, and a key
// for e.tenant and one for another tenant.
type mcpEnv struct {
	*env
	url, key, otherKey string
}

func newMCPEnv(t *testing.T) *mcpEnv {
	t.Helper()
	e := newEnv(t, withoutLLM())
	svc := &audit.Service{Store: e.store, Blob: e.blob}
	m, err := mcp.New(mcp.Deps{Gateway: e.gw, Audit: svc, MaxRequestBytes: httpMaxBytes, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	h := httpapi.New(httpapi.Deps{Gateway: e.gw, Audit: svc, Store: e.store, Blob: e.blob, MaxRequestBytes: httpMaxBytes,
		Logger: slog.New(slog.DiscardHandler), MCP: m.HTTPHandler()})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	me := &mcpEnv{env: e, url: srv.URL + "/mcp", key: "key-" + e.tenant + "-0123456789abcdef",
		otherKey: "key-other-" + e.tenant + "-0123456789abcdef"}
	require.NoError(t, e.store.AddAPIKey(t.Context(), e.tenant, me.key))
	require.NoError(t, e.store.AddAPIKey(t.Context(), "other-"+e.tenant, me.otherKey))
	return me
}

// bearer adds an API key to every request.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

// connectHTTP connects the Go SDK's client over streamable HTTP with key.
func connectHTTP(t *testing.T, url, key string) (*sdk.ClientSession, error) {
	t.Helper()
	tr := &sdk.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{key: key, base: http.DefaultTransport}, Timeout: 3 * time.Minute}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil).Connect(t.Context(), tr, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// callTool calls a tool that must succeed and decodes its structured
// result into out.
func callTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, name)
	require.False(t, res.IsError, "%s: %s", name, toolText(res))
	data, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, out), "%s: %s", name, data)
}

// toolError calls a tool that must fail with a tool error and returns
// its text.
func toolError(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, "%s: a tool error, not a protocol error", name)
	require.True(t, res.IsError, "%s must fail", name)
	return toolText(res)
}

func toolText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// mcpCheckpoint is the part of compress_to_checkpoint's result the tests
// read.
type mcpCheckpoint struct {
	RunID    string `json:"run_id"`
	Status   string `json:"status"`
	Existing bool   `json:"existing"`
	Final    bool   `json:"final"`
	Outcome  struct {
		RunID        string `json:"run_id"`
		Status       string `json:"status"`
		Format       string `json:"format"`
		TokensBefore int    `json:"tokens_before"`
		TokensAfter  int    `json:"tokens_after"`
		ContextLimit int    `json:"context_limit"`
		HandoffKey   string `json:"handoff_key"`
		OutputSHA256 string `json:"output_sha256"`
	} `json:"outcome"`
	Conversation json.RawMessage `json:"conversation"`
	Handoff      json.RawMessage `json:"handoff"`
	OutputURI    string          `json:"output_uri"`
	OriginalURI  string          `json:"original_uri"`
}

// exerciseMCP lists the tools and calls each on a real conversation in
// session, checking the results; it returns the checkpoint's result and
// an id the output names.
func exerciseMCP(t *testing.T, cs *sdk.ClientSession, session string) (mcpCheckpoint, string) {
	t.Helper()
	tools, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		require.NotNil(t, tool.OutputSchema, tool.Name)
	}
	require.ElementsMatch(t, []string{mcp.ToolCheckpoint, mcp.ToolRecover, mcp.ToolSearch, mcp.ToolStatus}, names)

	input := readData(t, mcpConversation)
	args := map[string]any{"session": session, "conversation": json.RawMessage(input), "model": "gpt-4o",
		"context_limit": mcpLimit, "preset": mcpPreset, "wait_seconds": 150}
	var cp mcpCheckpoint
	callTool(t, cs, mcp.ToolCheckpoint, args, &cp)
	require.True(t, cp.Final, "the run finished within the wait: %+v", cp)
	require.Equal(t, "succeeded", cp.Status)
	require.Equal(t, cp.RunID, cp.Outcome.RunID)
	require.Equal(t, "openai", cp.Outcome.Format)
	require.Equal(t, mcpLimit, cp.Outcome.ContextLimit)
	require.Less(t, cp.Outcome.TokensAfter, cp.Outcome.TokensBefore)
	require.LessOrEqual(t, cp.Outcome.TokensAfter, mcpLimit)
	require.Empty(t, cp.Conversation, "the result names the output; it does not repeat the conversation")
	require.NotEmpty(t, cp.Outcome.HandoffKey, "a checkpoint makes a handoff")
	require.True(t, json.Valid(cp.Handoff))
	require.Equal(t, "ctxcompact://runs/"+cp.RunID+"/output", cp.OutputURI)
	out, err := cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: cp.OutputURI})
	require.NoError(t, err)
	require.Len(t, out.Contents, 1)
	compacted := out.Contents[0].Text

	// The same checkpoint again is the same event: the same run. Asked
	// without the handoff, the answer leaves it out of the model's
	// context (ids and figures only).
	var again mcpCheckpoint
	args["include_handoff"] = false
	callTool(t, cs, mcp.ToolCheckpoint, args, &again)
	delete(args, "include_handoff")
	require.Equal(t, cp.RunID, again.RunID)
	require.True(t, again.Existing)
	require.Empty(t, again.Handoff, "include_handoff false")
	require.Equal(t, cp.Outcome.HandoffKey, again.Outcome.HandoffKey, "the handoff is still made and named")

	// Every cut names an id; each reads back.
	var id string
	for _, m := range recoverIDs.FindAllStringSubmatch(compacted, -1) {
		id = m[1]
		var rec struct {
			ID         string `json:"id"`
			Text       string `json:"text"`
			TotalLines int    `json:"total_lines"`
			Lines      string `json:"lines"`
		}
		callTool(t, cs, mcp.ToolRecover, map[string]any{"session": session, "id": id}, &rec)
		require.Equal(t, id, rec.ID)
		require.NotEmpty(t, rec.Text, id)
		require.Positive(t, rec.TotalLines)
		require.Empty(t, rec.Lines)
		if rec.TotalLines >= 2 {
			callTool(t, cs, mcp.ToolRecover, map[string]any{"session": session, "id": id, "lines": "1-2"}, &rec)
			require.Equal(t, "1-2", rec.Lines)
			require.Equal(t, 1, strings.Count(strings.TrimSuffix(rec.Text, "\n"), "\n"), "two lines: %q", rec.Text)
		}
		text := toolError(t, cs, mcp.ToolRecover, map[string]any{"session": session, "id": id, "lines": "100000-100001"})
		require.Contains(t, text, "lines")
		require.Contains(t, text, "starts past the end")
		// Another session of the same tenant does not have it.
		text = toolError(t, cs, mcp.ToolRecover, map[string]any{"session": "other-" + session, "id": id})
		require.Contains(t, text, "not found")
	}
	require.NotEmpty(t, id, "the checkpoint's output names ids to recover: %.2000s", compacted)
	require.Contains(t, toolError(t, cs, mcp.ToolRecover, map[string]any{"session": session, "id": "nope"}), "id")

	var found struct {
		Hits []struct {
			ID      string `json:"id"`
			Kind    string `json:"kind"`
			Excerpt string `json:"excerpt"`
		} `json:"hits"`
	}
	callTool(t, cs, mcp.ToolSearch, map[string]any{"session": session, "query": "django"}, &found)
	require.NotEmpty(t, found.Hits)
	require.NotEmpty(t, found.Hits[0].ID)
	require.Contains(t, toolError(t, cs, mcp.ToolSearch, map[string]any{"session": "unknown-" + session, "query": "django"}), "not found")

	var st struct {
		Session      string  `json:"session"`
		Level        string  `json:"level"`
		Tokens       int     `json:"tokens"`
		ContextLimit int     `json:"context_limit"`
		Usage        float64 `json:"usage"`
		LastRunID    string  `json:"last_run_id"`
		BreakerOpen  bool    `json:"breaker_open"`
		RecentRuns   []struct {
			RunID   string `json:"run_id"`
			Trigger string `json:"trigger"`
			Status  string `json:"status"`
		} `json:"recent_runs"`
	}
	callTool(t, cs, mcp.ToolStatus, map[string]any{"session": session}, &st)
	require.Equal(t, session, st.Session)
	require.Equal(t, cp.RunID, st.LastRunID)
	require.Equal(t, mcpLimit, st.ContextLimit)
	require.Equal(t, cp.Outcome.TokensAfter, st.Tokens)
	require.NotEmpty(t, st.Level)
	require.False(t, st.BreakerOpen)
	require.Len(t, st.RecentRuns, 1)
	require.Equal(t, cp.RunID, st.RecentRuns[0].RunID)
	require.Equal(t, "checkpoint", st.RecentRuns[0].Trigger)

	// The run's resources: its output byte for byte, its original.
	sum := sha256.Sum256([]byte(out.Contents[0].Text))
	require.Equal(t, cp.Outcome.OutputSHA256, hex.EncodeToString(sum[:]), "the output resource is the stored output")
	orig, err := cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: cp.OriginalURI})
	require.NoError(t, err)
	require.JSONEq(t, string(input), orig.Contents[0].Text, "the original is the conversation given")
	_, err = cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: "ctxcompact://runs/no-such-run/output"})
	require.Error(t, err)
	return cp, id
}

func TestMCPStreamableHTTP(t *testing.T) {
	t.Parallel()
	m := newMCPEnv(t)

	// No key, or a wrong one: 401 before any MCP.
	for _, key := range []string{"", "not-a-key"} {
		req, err := http.NewRequest(http.MethodPost, m.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	}
	_, err := connectHTTP(t, m.url, "")
	require.Error(t, err, "no key, no session")

	cs, err := connectHTTP(t, m.url, m.key)
	require.NoError(t, err)
	cp, id := exerciseMCP(t, cs, "mcp-http")

	// The answer is stateless JSON: no stream holds the tenant's slot.
	req, err := http.NewRequest(http.MethodPost, m.url, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+m.key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "application/json")

	// Another tenant's key reads none of it.
	other, err := connectHTTP(t, m.url, m.otherKey)
	require.NoError(t, err)
	for _, uri := range []string{cp.OutputURI, cp.OriginalURI} {
		_, err := other.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: uri})
		require.Error(t, err, "another tenant cannot read %s", uri)
	}
	require.Contains(t, toolError(t, other, mcp.ToolRecover, map[string]any{"session": "mcp-http", "id": id}), "not found")
	var otherStatus struct {
		LastRunID  string `json:"last_run_id"`
		RecentRuns []any  `json:"recent_runs"`
	}
	callTool(t, other, mcp.ToolStatus, map[string]any{"session": "mcp-http"}, &otherStatus)
	require.Empty(t, otherStatus.LastRunID, "another tenant's session of that name has nothing")
	require.Empty(t, otherStatus.RecentRuns)
	require.Contains(t, toolError(t, other, mcp.ToolSearch, map[string]any{"session": "mcp-http", "query": "django"}), "not found")

	// Without a wait the answer is the run id and status; the same
	// arguments again join that run and wait for it.
	args := map[string]any{"session": "mcp-http-later", "conversation": json.RawMessage(readData(t, mcpConversation)),
		"context_limit": mcpLimit, "preset": mcpPreset, "wait_seconds": 0}
	var first mcpCheckpoint
	callTool(t, cs, mcp.ToolCheckpoint, args, &first)
	require.NotEmpty(t, first.RunID)
	if !first.Final {
		require.Contains(t, []string{"pending", "running"}, first.Status)
	}
	args["wait_seconds"] = 150
	var later mcpCheckpoint
	callTool(t, cs, mcp.ToolCheckpoint, args, &later)
	require.Equal(t, first.RunID, later.RunID)
	require.True(t, later.Existing)
	require.True(t, later.Final)
	require.Equal(t, "succeeded", later.Status)
	require.NotEmpty(t, later.Outcome.OutputSHA256)

	// The next checkpoint sends only what the agent appended: the tool
	// compacts the session's stored state with it.
	// The agent answers the calls its last turn left pending, then asks
	// for more.
	res, err := cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: later.OutputURI})
	require.NoError(t, err)
	var doc struct {
		Messages []struct {
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Contents[0].Text), &doc))
	var appended []map[string]any
	if last := doc.Messages[len(doc.Messages)-1]; len(last.ToolCalls) > 0 {
		for _, c := range last.ToolCalls {
			appended = append(appended, map[string]any{"role": "tool", "tool_call_id": c.ID, "content": "done"})
		}
	}
	appended = append(appended, map[string]any{"role": "user", "content": "Now also add a regression test for the fix."})
	var next mcpCheckpoint
	callTool(t, cs, mcp.ToolCheckpoint, map[string]any{"session": "mcp-http-later", "context_limit": mcpLimit, "preset": mcpPreset,
		"wait_seconds": 150, "messages": appended}, &next)
	require.True(t, next.Final)
	require.Equal(t, "succeeded", next.Status, "%+v", next)
	require.NotEqual(t, later.RunID, next.RunID)
	// A session with nothing stored yet: the whole conversation is needed.
	require.Contains(t, toolError(t, cs, mcp.ToolCheckpoint, map[string]any{"session": "mcp-http-new",
		"messages": json.RawMessage(`[{"role":"user","content":"hi"}]`)}), "conversation")
	// context_status answers for a session with no runs yet.
	var fresh struct {
		Session    string `json:"session"`
		LastRunID  string `json:"last_run_id"`
		RecentRuns []any  `json:"recent_runs"`
	}
	callTool(t, cs, mcp.ToolStatus, map[string]any{"session": "mcp-http-new"}, &fresh)
	require.Equal(t, "mcp-http-new", fresh.Session)
	require.Empty(t, fresh.LastRunID)
	require.Empty(t, fresh.RecentRuns)

	// A bad conversation is a tool error naming where.
	text := toolError(t, cs, mcp.ToolCheckpoint, map[string]any{"session": "mcp-http",
		"conversation": map[string]any{"messages": []any{map[string]any{"role": "wizard", "content": "x"}}}})
	require.Contains(t, text, "conversation")
}

// TestMCPNodeClient runs a client nobody here wrote, the official MCP
// TypeScript SDK (e2e/node/mcp-client.mjs), against /mcp: it lists the
// tools, calls each and checks every structured result against its
// tool's output schema. Node and e2e/node/node_modules (bash
// deploy/test-deps.sh) are required: missing, the test fails.
func TestMCPNodeClient(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node is required (bash deploy/test-deps.sh)")
	_, err = os.Stat("node/node_modules/@modelcontextprotocol/sdk/package.json")
	require.NoError(t, err, "e2e/node/node_modules is required (bash deploy/test-deps.sh)")
	m := newMCPEnv(t)
	conv, err := filepath.Abs(filepath.Join(dataDir, mcpConversation))
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "node/mcp-client.mjs")
	cmd.Env = append(os.Environ(), "MCP_URL="+m.url, "MCP_KEY="+m.key, "MCP_OTHER_KEY="+m.otherKey,
		"MCP_CONVERSATION="+conv, "MCP_SESSION=mcp-node", fmt.Sprintf("MCP_CONTEXT_LIMIT=%d", mcpLimit), "MCP_PRESET="+mcpPreset)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("node mcp-client.mjs:\n%s", out.String())
	require.NoError(t, err, "the TypeScript SDK client failed")
	require.Contains(t, out.String(), "mcp-client: ok")
}

// TestMCPStdio runs `starter mcp` as a subprocess on this test's stack
// (its gateway in-process, as `starter compact`) and talks to it over
// stdio with the Go SDK's CommandTransport.
func TestMCPStdio(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "starter")
	// The subprocess and the test's worker share one schema and bucket.
	dbURL := storetest.NewURL(t)
	st := storetest.Open(t, dbURL)
	bcfg := blobtest.NewConfig(t)
	bs, err := blob.New(t.Context(), bcfg)
	require.NoError(t, err)
	e := newEnv(t, withoutLLM(), noWorker(), withBlob(bs))
	e.store, e.deps.Store, e.gw.Store = st, st, st
	e.startWorker()

	cmd := exec.Command(bin, "mcp")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(), // no user's AWS or other config leaks in
		"TEMPORAL_ADDRESS=" + server.GetFrontendHostPort(),
		"TEMPORAL_NAMESPACE=" + server.GetDefaultNamespace(),
		"TEMPORAL_TASK_QUEUE=" + e.taskQueue,
		"DATABASE_URL=" + dbURL,
		"S3_ENDPOINT=" + bcfg.Endpoint,
		"S3_BUCKET=" + bcfg.Bucket,
		"S3_ACCESS_KEY=" + bcfg.AccessKey,
		"S3_SECRET_KEY=" + bcfg.SecretKey,
		"S3_PATH_STYLE=true",
		"COMPACTOR_TENANT=" + e.tenant,
		"BREAKER_RUNS=0",
		"LOG_LEVEL=warn",
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e-stdio", Version: "1"}, nil).
		Connect(t.Context(), &sdk.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err, "starter mcp: %s", stderr.String())
	defer func() {
		require.NoError(t, cs.Close(), "starter mcp exits when stdin closes: %s", stderr.String())
	}()
	cp, _ := exerciseMCP(t, cs, "mcp-stdio")

	// The run is this tenant's, in the shared store.
	run, err := st.GetRun(t.Context(), cp.RunID)
	require.NoError(t, err)
	require.Equal(t, e.tenant, run.Tenant)
	require.Equal(t, "checkpoint", run.Trigger)
	require.NotContains(t, stderr.String(), "ERROR", "stderr: %s", stderr.String())
}
