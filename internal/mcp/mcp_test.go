package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// newService is a Service over a gateway and stores that are never
// reached: every call these tests make fails its validation first.
func newService(t *testing.T) *Service {
	t.Helper()
	s, err := New(Deps{Gateway: &gateway.Gateway{DefaultPreset: policy.Adaptive},
		Audit: &audit.Service{Store: &store.Store{}, Blob: &blob.Store{}}})
	require.NoError(t, err)
	return s
}

// connect connects a client to the server of tenant over in-memory
// transports.
func connect(t *testing.T, s *Service, tenant string) *sdk.ClientSession {
	t.Helper()
	ctx := t.Context()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := s.Server(tenant).Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func TestNewNeedsItsDependencies(t *testing.T) {
	t.Parallel()
	_, err := New(Deps{})
	require.Error(t, err)
	_, err = New(Deps{Gateway: &gateway.Gateway{}, Audit: &audit.Service{}})
	require.Error(t, err)
}

func TestToolsHaveInputAndOutputSchemas(t *testing.T) {
	t.Parallel()
	cs := connect(t, newService(t), "acme")
	res, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	byName := map[string]*sdk.Tool{}
	for _, tool := range res.Tools {
		byName[tool.Name] = tool
	}
	required := map[string][]string{
		ToolCheckpoint: {"session"},
		ToolRecover:    {"session", "id"},
		ToolSearch:     {"session", "query"},
		ToolStatus:     {"session"},
	}
	require.Len(t, byName, len(required))
	for name, want := range required {
		tool := byName[name]
		require.NotNil(t, tool, name)
		require.NotEmpty(t, tool.Description, name)
		in := schemaJSON(t, tool.InputSchema)
		require.Equal(t, "object", in["type"], name)
		require.ElementsMatch(t, want, in["required"], name)
		out := schemaJSON(t, tool.OutputSchema)
		require.Equal(t, "object", out["type"], "%s has an output schema", name)
		require.NotEmpty(t, out["properties"], name)
	}
	// A conversation is any JSON value, not the bytes of its Go type.
	conv := schemaJSON(t, byName[ToolCheckpoint].InputSchema)["properties"].(map[string]any)["conversation"].(map[string]any)
	require.NotContains(t, conv, "type")
	require.NotEmpty(t, conv["description"])

	templates, err := cs.ListResourceTemplates(t.Context(), nil)
	require.NoError(t, err)
	var uris []string
	for _, rt := range templates.ResourceTemplates {
		uris = append(uris, rt.URITemplate)
	}
	require.ElementsMatch(t, []string{OutputTemplate, OriginalTemplate}, uris)
}

// schemaJSON is a schema as its JSON object.
func schemaJSON(t *testing.T, s any) map[string]any {
	t.Helper()
	data, err := json.Marshal(s)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	return m
}

// TestBadArgumentsAreToolErrorsNamingTheField: every bad argument is an
// MCP tool error (isError, not a protocol error) whose text names the
// argument.
func TestBadArgumentsAreToolErrorsNamingTheField(t *testing.T) {
	t.Parallel()
	cs := connect(t, newService(t), "acme")
	conv := json.RawMessage(`{"messages":[{"role":"user","content":"hi"}]}`)
	for _, tc := range []struct {
		name, tool string
		args       map[string]any
		field      string
	}{
		{"checkpoint with a conversation and messages", ToolCheckpoint, map[string]any{"session": "s1", "conversation": conv, "messages": []any{map[string]any{"role": "user", "content": "x"}}}, "messages"},
		{"checkpoint messages not a list", ToolCheckpoint, map[string]any{"session": "s1", "messages": map[string]any{"role": "user"}}, "messages"},
		{"checkpoint without session", ToolCheckpoint, map[string]any{"conversation": conv}, "session"},
		{"checkpoint empty session", ToolCheckpoint, map[string]any{"session": "", "conversation": conv}, "session"},
		{"checkpoint session with a slash", ToolCheckpoint, map[string]any{"session": "a/b", "conversation": conv}, "session"},
		{"checkpoint number conversation", ToolCheckpoint, map[string]any{"session": "s1", "conversation": 5}, "conversation"},
		{"checkpoint string of no JSON", ToolCheckpoint, map[string]any{"session": "s1", "conversation": "hello"}, "conversation"},
		{"checkpoint unparsable conversation", ToolCheckpoint, map[string]any{"session": "s1", "conversation": map[string]any{"messages": "x"}}, "conversation"},
		{"checkpoint wait too long", ToolCheckpoint, map[string]any{"session": "s1", "conversation": conv, "wait_seconds": 100000}, "wait_seconds"},
		{"checkpoint negative wait", ToolCheckpoint, map[string]any{"session": "s1", "conversation": conv, "wait_seconds": -1}, "wait_seconds"},
		{"checkpoint limit of the wrong type", ToolCheckpoint, map[string]any{"session": "s1", "conversation": conv, "context_limit": "big"}, "context_limit"},
		{"checkpoint negative limit", ToolCheckpoint, map[string]any{"session": "s1", "conversation": conv, "context_limit": -5}, "context_limit"},
		{"checkpoint unknown preset", ToolCheckpoint, map[string]any{"session": "s1", "conversation": conv, "preset": "nope"}, "preset"},
		{"checkpoint bad model", ToolCheckpoint, map[string]any{"session": "s1", "conversation": conv, "model": " gpt"}, "model"},
		{"checkpoint bad event id", ToolCheckpoint, map[string]any{"session": "s1", "conversation": conv, "event_id": ".."}, "event_id"},
		{"checkpoint unknown argument", ToolCheckpoint, map[string]any{"session": "s1", "conversation": conv, "kind": "manual"}, "kind"},
		{"recover without id", ToolRecover, map[string]any{"session": "s1"}, "id"},
		{"recover empty id", ToolRecover, map[string]any{"session": "s1", "id": ""}, "id"},
		{"recover bad session", ToolRecover, map[string]any{"session": "..", "id": "abc"}, "session"},
		{"search empty query", ToolSearch, map[string]any{"session": "s1", "query": "  "}, "query"},
		{"search limit too high", ToolSearch, map[string]any{"session": "s1", "query": "x", "limit": 5000}, "limit"},
		{"search limit of the wrong type", ToolSearch, map[string]any{"session": "s1", "query": "x", "limit": "all"}, "limit"},
		{"status without session", ToolStatus, map[string]any{}, "session"},
		{"status bad session", ToolStatus, map[string]any{"session": "\x00"}, "session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: tc.tool, Arguments: tc.args})
			require.NoError(t, err, "a bad argument is a tool error, not a protocol error")
			require.True(t, res.IsError, "tool error expected")
			require.Nil(t, res.StructuredContent)
			require.NotEmpty(t, res.Content)
			text := res.Content[0].(*sdk.TextContent).Text
			t.Log(text)
			require.Contains(t, text, tc.field, "the error names the field: %s", text)
		})
	}
}

func TestConversationArgument(t *testing.T) {
	t.Parallel()
	got, err := conversationArg(json.RawMessage(` {"messages":[]} `))
	require.NoError(t, err)
	require.JSONEq(t, `{"messages":[]}`, string(got))
	got, err = conversationArg(json.RawMessage(`"[{\"role\":\"user\",\"content\":\"hi\"}]"`))
	require.NoError(t, err, "a JSON string holding the conversation is accepted")
	require.JSONEq(t, `[{"role":"user","content":"hi"}]`, string(got))
	for _, bad := range []string{``, `null`, `3`, `true`, `"x"`, `"3"`} {
		_, err := conversationArg(json.RawMessage(bad))
		require.ErrorContains(t, err, "conversation", "%q", bad)
	}
}

func TestResourceURIs(t *testing.T) {
	t.Parallel()
	run, ok := runOf("ctxcompact://runs/abc-1/output", "output")
	require.True(t, ok)
	require.Equal(t, "abc-1", run)
	for _, bad := range []string{"ctxcompact://runs//output", "ctxcompact://runs/a/b/output", "ctxcompact://runs/a/original",
		"other://runs/a/output", "ctxcompact://runs/../output"} {
		_, ok := runOf(bad, "output")
		require.False(t, ok, bad)
	}
	cs := connect(t, newService(t), "acme")
	_, err := cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: "ctxcompact://runs/a/b/output"})
	require.Error(t, err, "a URI that names no run is not found")
}

// TestHTTPHandlerNeedsATenant: outside the API's authentication (no
// tenant in the request's context) the handler serves nobody.
func TestHTTPHandlerNeedsATenant(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(newService(t).HTTPHandler())
	t.Cleanup(srv.Close)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},` +
		`"clientInfo":{"name":"t","version":"1"}}}`
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}
