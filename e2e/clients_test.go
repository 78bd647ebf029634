package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/ctxcompact/orchestrator/client"
)

// The Python (clients/python) and TypeScript (clients/typescript) clients:
// their integration scripts against the real stack over HTTP, their unit
// tests, their webhook verification against the Standard Webhooks
// reference library, and their type declarations against api/openapi.yaml.

// repoRoot is the repository, from this package's folder.
const repoRoot = ".."

// clientTools finds python3 and node and checks that e2e/node's packages
// (the TypeScript compiler, standardwebhooks) are installed. Anything
// missing fails the test: these clients are part of the repository.
func clientTools(t *testing.T) (python, node string) {
	t.Helper()
	const fix = "run `bash deploy/test-deps.sh` (it installs what the tests need)"
	python, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 is missing for the Python client's tests; %s", fix)
	node, err = exec.LookPath("node")
	require.NoError(t, err, "node is missing for the TypeScript client's tests; %s", fix)
	for _, p := range []string{"e2e/node/node_modules/typescript/bin/tsc", "e2e/node/node_modules/standardwebhooks/package.json"} {
		_, err := os.Stat(filepath.Join(repoRoot, p))
		require.NoError(t, err, "e2e/node/node_modules is missing or incomplete; %s", fix)
	}
	return python, node
}

var (
	tscOnce sync.Once
	tscOut  []byte
	tscErr  error
)

// compileTS compiles clients/typescript into clients/typescript/dist with
// e2e/node's TypeScript compiler, once per test binary.
func compileTS(t *testing.T, node string) {
	t.Helper()
	tscOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "e2e/node/node_modules/typescript/bin/tsc", "-p", "clients/typescript")
		cmd.Dir = repoRoot
		tscOut, tscErr = cmd.CombinedOutput()
	})
	require.NoError(t, tscErr, "tsc -p clients/typescript:\n%s", tscOut)
}

// runScript runs a client's script from the repository root with env
// added, failing the test with its output when it exits non-zero.
func runScript(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = repoRoot
	// No __pycache__ left in the repository by the Python scripts.
	cmd.Env = append(append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1"), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
	t.Logf("%s %s:\n%s", filepath.Base(name), strings.Join(args, " "), out)
	return string(out)
}

// TestClientsIntegration runs each client's integration script against the
// real stack (the API of `starter serve` over HTTP, as newAPIEnv serves
// it), each as its own tenant: a real conversation offloaded by
// offload-compact, submitted (202 and then 200), waited for, its output and
// original read; its offloads listed and recovered, searched; an
// incremental event; the session's status; a run over its limit with its
// handoff, replayed and the replay promoted; a session erased and then
// gone (410); the retention set and unset; a webhook registered twice (one
// endpoint), listed, rotated, deleted; error answers decoded.
func TestClientsIntegration(t *testing.T) {
	t.Parallel()
	python, node := clientTools(t)
	compileTS(t, node)
	a := newAPIEnv(t, withoutLLM())
	conv, err := filepath.Abs(filepath.Join(dataDir, "swe-agent-deepseek/django__django-11742.json"))
	require.NoError(t, err)
	// An endpoint URL the deployment allows (no run ends while one is
	// registered: nothing is delivered to it).
	hook := startReceiver(t, "")
	// Retention and webhooks are the tenant's: each script has its own.
	env := func(key, session string) []string {
		return []string{"CTXCOMPACT_URL=" + a.url, "CTXCOMPACT_API_KEY=" + key,
			"CTXCOMPACT_CONVERSATION=" + conv, "CTXCOMPACT_SESSION=" + session,
			"CTXCOMPACT_WEBHOOK_URL=" + hook.url + "/" + session}
	}
	t.Run("python", func(t *testing.T) {
		t.Parallel()
		out := runScript(t, env(a.key, "py-client"), python, "clients/python/tests/integration.py")
		require.Contains(t, out, "python client: ok")
	})
	t.Run("typescript", func(t *testing.T) {
		t.Parallel()
		out := runScript(t, env(a.otherKey, "ts-client"), node, "clients/typescript/dist/test/integration.js")
		require.Contains(t, out, "typescript client: ok")
	})
}

// TestClientsWebhookCrosscheck: what the Standard Webhooks reference
// library signs, both clients accept; a tampered body or id, an old or
// future timestamp and a wrong secret they reject, as the library does.
func TestClientsWebhookCrosscheck(t *testing.T) {
	t.Parallel()
	python, node := clientTools(t)
	compileTS(t, node)
	out := runScript(t, []string{"PYTHON=" + python}, node, "e2e/node/webhook-crosscheck.mjs")
	require.Contains(t, out, "webhook cross-check: ok")
}

// TestClientsPythonUnit runs the Python client's unit tests (no network).
func TestClientsPythonUnit(t *testing.T) {
	t.Parallel()
	python, _ := clientTools(t)
	runScript(t, nil, python, "-m", "unittest", "discover", "-s", "clients/python/tests")
}

// TestClientsTypeScriptUnit runs the TypeScript client's unit checks (a
// fake fetch, a webhook vector of the reference library; no network).
func TestClientsTypeScriptUnit(t *testing.T) {
	t.Parallel()
	_, node := clientTools(t)
	compileTS(t, node)
	out := runScript(t, nil, node, "clients/typescript/dist/test/unit.js")
	require.Contains(t, out, "typescript unit: ok")
}

// clientTypes maps a schema of api/openapi.yaml (a path of property names
// under components/schemas; "items" steps into an array) to the type both
// clients declare for it.
var clientTypes = []struct{ schema, typ string }{
	{"RunResult", "RunResult"},
	{"PassStat", "PassStat"},
	{"CacheFigures", "CacheFigures"},
	{"LogFigures", "LogFigures"},
	{"CostFigures", "CostFigures"},
	{"Accepted", "Accepted"},
	{"RunDetail", "RunDetail"},
	{"RunRecord", "RunRecord"},
	{"StepRecord", "StepRecord"},
	{"DriftRecord", "DriftRecord"},
	{"OffloadList", "OffloadList"},
	{"OffloadList.offloads.items", "Offload"},
	{"SearchResult", "SearchResult"},
	{"Hit", "Hit"},
	{"Error", "ErrorResponse"},
	{"Error.error", "ErrorBody"},
	{"SessionStatus", "SessionStatus"},
	{"HistoryRow", "HistoryRow"},
	{"Promotion", "Promotion"},
	{"PromoteResponse", "PromoteResponse"},
	{"Submitted", "Submitted"},
	{"Erasure", "Erasure"},
	{"Retention", "Retention"},
	{"WebhookEndpoint", "WebhookEndpoint"},
	{"WebhookList", "WebhookList"},
	{"Delivery", "Delivery"},
	{"DeliveryAttempt", "DeliveryAttempt"},
	{"DeliveryList", "DeliveryList"},
	{"Redelivered", "Redelivered"},
	{"PreviousErasure", "PreviousErasure"},
	{"RunList", "RunList"},
	{"Diff", "Diff"},
	{"Change", "Change"},
	{"WatermarkList", "WatermarkList"},
	{"WatermarkList.watermarks.items", "Watermark"},
	{"SnapshotList", "SnapshotList"},
	{"SnapshotList.snapshots.items", "Snapshot"},
	{"SnapshotConversation", "SnapshotConversation"},
	{"InspectResult", "InspectResult"},
	{"InspectResult.report", "InspectReport"},
	{"CompressResult", "CompressResult"},
	{"ReplaysResult", "ReplaysResult"},
}

// clientRequests maps a request schema of api/openapi.yaml to the
// TypeScript interface and the Python method whose parameters (but the
// path's, pathParam, and with a trailing _ dropped) are its properties.
var clientRequests = []struct{ schema, ts, py, pathParam string }{
	{"EventRequest", "EventRequest", "submit_event", "session"},
	{"ReplayRequest", "ReplayRequest", "replay_run", "run_id"},
	{"InspectRequest", "InspectRequest", "inspect", "session"},
	{"CompressRequest", "CompressRequest", "compress_result", ""},
	{"ReplaysRequest", "ReplaysRequest", "replay_failed", ""},
	{"CompactRequest", "", "compact", "session"},
}

// clientEnums maps an enum of api/openapi.yaml to the union both clients
// declare (Literal in Python, a string union in TypeScript).
var clientEnums = []struct{ schema, typ string }{
	{"RunStatus", "RunStatus"},
	{"ErrorClass", "ErrorClass"},
	{"Error.error.code", "ErrorCode"},
	{"Erasure.status", "ErasureStatus"},
	{"Delivery.status", "DeliveryStatus"},
	{"RunResult.token_counting", "TokenCounting"},
}

var (
	pyClass      = regexp.MustCompile(`(?m)^class (\w+)\((\w+)(?:, total=False)?\):\n((?:[ \t]+.*\n|\n)*)`)
	pyClassField = regexp.MustCompile(`(?m)^    (\w+): `)
	pyFunc       = regexp.MustCompile(`(?ms)^(\w+) = TypedDict\("\w+", \{\n(.*?)^\}`)
	pyFuncField  = regexp.MustCompile(`(?m)^    "(\w+)": `)
	pyLiteral    = regexp.MustCompile(`(?m)^(\w+) = Literal\[(.*)\]$`)
	pyDef        = regexp.MustCompile(`(?s)\n    def (\w+)\((.*?)\) -> `)
	pyParam      = regexp.MustCompile(`(\w+)\s*:`)
	tsInterface  = regexp.MustCompile(`(?ms)^export interface (\w+)(?: extends (\w+))? \{\n(.*?)^\}`)
	tsField      = regexp.MustCompile(`(?m)^  (\w+)\??: `)
	tsUnion      = regexp.MustCompile(`(?m)^export type (\w+) = (.*);$`)
	quoted       = regexp.MustCompile(`"([^"]+)"`)
)

// TestClientsMatchOpenAPI: every property of the schemas the clients
// model is declared by both, and nothing else, so that a field added to
// the API and not to a client fails here; the same for the enums they
// declare and for the event request (TypeScript's EventRequest, Python's
// submit_event parameters).
func TestClientsMatchOpenAPI(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(repoRoot, "api/openapi.yaml"))
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(data, &doc))
	schemas := dig(t, doc, "components", "schemas")

	pySrc, err := os.ReadFile(filepath.Join(repoRoot, "clients/python/ctxcompact/types.py"))
	require.NoError(t, err)
	pyClient, err := os.ReadFile(filepath.Join(repoRoot, "clients/python/ctxcompact/client.py"))
	require.NoError(t, err)
	tsSrc, err := os.ReadFile(filepath.Join(repoRoot, "clients/typescript/src/index.ts"))
	require.NoError(t, err)

	// A type's fields are its own and its base's (class X(Base), interface
	// X extends Base), the base declared before it.
	py := map[string][]string{}
	for _, m := range pyClass.FindAllStringSubmatch(string(pySrc), -1) {
		py[m[1]] = append(append([]string(nil), py[m[2]]...), submatches(pyClassField, m[3])...)
	}
	for _, m := range pyFunc.FindAllStringSubmatch(string(pySrc), -1) {
		py[m[1]] = submatches(pyFuncField, m[2])
	}
	ts := map[string][]string{}
	for _, m := range tsInterface.FindAllStringSubmatch(string(tsSrc), -1) {
		ts[m[1]] = append(append([]string(nil), ts[m[2]]...), submatches(tsField, m[3])...)
	}
	for _, c := range clientTypes {
		want := properties(t, schemas, c.schema)
		require.NotEmpty(t, want, "schema %s has properties", c.schema)
		require.Contains(t, py, c.typ, "clients/python/ctxcompact/types.py declares %s (schema %s)", c.typ, c.schema)
		require.Equal(t, want, sorted(py[c.typ]), "Python's %s has the properties of schema %s", c.typ, c.schema)
		require.Contains(t, ts, c.typ, "clients/typescript/src/index.ts declares %s (schema %s)", c.typ, c.schema)
		require.Equal(t, want, sorted(ts[c.typ]), "TypeScript's %s has the properties of schema %s", c.typ, c.schema)
	}

	// The requests: TypeScript's interfaces, Python's parameters.
	pyParams := map[string][]string{}
	for _, m := range pyDef.FindAllStringSubmatch(string(pyClient), -1) {
		for _, p := range submatches(pyParam, m[2]) {
			if p != "self" {
				pyParams[m[1]] = append(pyParams[m[1]], strings.TrimSuffix(p, "_"))
			}
		}
	}
	for _, r := range clientRequests {
		want := properties(t, schemas, r.schema)
		if r.ts != "" {
			require.Equal(t, want, sorted(ts[r.ts]), "TypeScript's %s has the properties of schema %s", r.ts, r.schema)
		}
		params := pyParams[r.py]
		require.NotEmpty(t, params, "clients/python/ctxcompact/client.py has %s", r.py)
		if r.pathParam != "" {
			require.Equal(t, r.pathParam, params[0], "Python's %s takes the path's %s first", r.py, r.pathParam)
			params = params[1:]
		}
		require.Equal(t, want, sorted(params), "Python's %s takes the properties of schema %s", r.py, r.schema)
	}

	// The enums.
	pyEnums, tsEnums := map[string][]string{}, map[string][]string{}
	for _, m := range pyLiteral.FindAllStringSubmatch(string(pySrc), -1) {
		pyEnums[m[1]] = submatches(quoted, m[2])
	}
	for _, m := range tsUnion.FindAllStringSubmatch(string(tsSrc), -1) {
		tsEnums[m[1]] = submatches(quoted, m[2])
	}
	for _, e := range clientEnums {
		want := enumValues(t, schemas, e.schema)
		require.Equal(t, want, sorted(pyEnums[e.typ]), "Python's %s has the values of %s", e.typ, e.schema)
		require.Equal(t, want, sorted(tsEnums[e.typ]), "TypeScript's %s has the values of %s", e.typ, e.schema)
	}
	require.Equal(t, enumValues(t, schemas, "EventRequest.preset"), sorted(tsEnums["Preset"]),
		"TypeScript's Preset has the values of EventRequest.preset")
}

// schemaAt follows a path of property names (and "items") from a schema
// of components/schemas.
func schemaAt(t *testing.T, schemas map[string]any, path string) map[string]any {
	t.Helper()
	parts := strings.Split(path, ".")
	s, ok := schemas[parts[0]].(map[string]any)
	require.True(t, ok, "components/schemas/%s", parts[0])
	for _, p := range parts[1:] {
		if p == "items" {
			s, ok = s["items"].(map[string]any)
		} else {
			s, ok = dig(t, s, "properties")[p].(map[string]any)
		}
		require.True(t, ok, "%s: no %s", path, p)
	}
	return s
}

// properties lists a schema's property names, sorted.
func properties(t *testing.T, schemas map[string]any, path string) []string {
	t.Helper()
	var names []string
	for k := range dig(t, schemaAt(t, schemas, path), "properties") {
		names = append(names, k)
	}
	return sorted(names)
}

// enumValues lists a schema's enum, sorted.
func enumValues(t *testing.T, schemas map[string]any, path string) []string {
	t.Helper()
	vals, ok := schemaAt(t, schemas, path)["enum"].([]any)
	require.True(t, ok, "%s has an enum", path)
	var out []string
	for _, v := range vals {
		out = append(out, v.(string))
	}
	return sorted(out)
}

func dig(t *testing.T, m map[string]any, keys ...string) map[string]any {
	t.Helper()
	for _, k := range keys {
		next, ok := m[k].(map[string]any)
		require.True(t, ok, "no object %q in the OpenAPI document", k)
		m = next
	}
	return m
}

func submatches(re *regexp.Regexp, s string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// notInClients are the operations under /v1 of api/openapi.yaml that the
// Python and TypeScript clients leave to plain HTTP, each with why, as the
// Go client's list (client/contract_test.go) does; none today. Keep it
// short: any other operation must be a method of each client.
var notInClients = map[string]string{}

var (
	// A client method names its operation on the line above it.
	pyOp     = regexp.MustCompile(`(?m)^    # op: ([A-Z]+) (\S+)\n    def (\w+)\(`)
	tsOp     = regexp.MustCompile(`(?m)^  // op: ([A-Z]+) (\S+)\n  async (\w+)\(`)
	anyOpTag = regexp.MustCompile(`(?m)^\s*(?:#|//) op: `)
)

// TestClientsCoverTheAPI: every operation under /v1 of api/openapi.yaml is
// a method of the Python and the TypeScript client (marked "# op: METHOD
// /path" or "// op: METHOD /path" on the line above it) or is on
// notInClients; every marked operation is documented; no marker stands
// anywhere but above a method. Removing a method, or adding an operation
// to the document without one, fails here.
func TestClientsCoverTheAPI(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(repoRoot, "api/openapi.yaml"))
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(data, &doc))
	var spec []string
	for path, item := range dig(t, doc, "paths") {
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		for method := range item.(map[string]any) {
			switch method {
			case "get", "put", "post", "delete", "patch":
				spec = append(spec, strings.ToUpper(method)+" "+path)
			}
		}
	}
	for op := range notInClients {
		require.Contains(t, spec, op, "notInClients lists %s, which api/openapi.yaml does not document", op)
	}
	for _, c := range []struct {
		file string
		re   *regexp.Regexp
	}{
		{"clients/python/ctxcompact/client.py", pyOp},
		{"clients/typescript/src/index.ts", tsOp},
	} {
		src, err := os.ReadFile(filepath.Join(repoRoot, c.file))
		require.NoError(t, err)
		ops := map[string]string{}
		matches := c.re.FindAllStringSubmatch(string(src), -1)
		require.Len(t, anyOpTag.FindAllString(string(src), -1), len(matches),
			"%s: every op marker stands on the line above a method", c.file)
		for _, m := range matches {
			op := m[1] + " " + m[2]
			require.NotContains(t, ops, op, "%s: %s and %s both name %s", c.file, ops[op], m[3], op)
			ops[op] = m[3]
			require.Contains(t, spec, op, "%s: %s names %s, which api/openapi.yaml does not document", c.file, m[3], op)
		}
		for _, op := range spec {
			if _, excluded := notInClients[op]; excluded {
				require.NotContains(t, ops, op, "%s implements %s (%s): take it off notInClients", c.file, op, ops[op])
				continue
			}
			require.Contains(t, ops, op, "%s has no method for %s (mark one with op: %s)", c.file, op, op)
		}
	}
}

// TestClientsGoIntegration is the Go client's pass over the management
// routes on the real stack, as the Python and TypeScript scripts do: the
// original back, an incremental event, the session's status; a run over
// its limit with its handoff, replayed and the replay promoted; a session
// erased and then gone (*client.GoneError naming the erasure); the
// retention set and unset; a webhook registered twice (one endpoint),
// listed, rotated and deleted; deliveries and a redelivery of none.
func TestClientsGoIntegration(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM())
	hook := startReceiver(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := client.New(a.url, a.key, a.client)
	input := readData(t, "swe-agent-deepseek/django__django-11742.json")
	overrides := json.RawMessage(`{"offload":{"trigger_usage":0,"min_tokens":300}}`)

	res, _, err := c.Submit(ctx, "go", client.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 200000,
		Overrides: overrides, Conversation: input, WaitSeconds: 120})
	require.NoError(t, err)
	require.Equal(t, "succeeded", res.Status, res.Error)
	orig, err := c.Original(ctx, res.RunID)
	require.NoError(t, err)
	require.Equal(t, input, orig, "the original, byte for byte")

	// An incremental event: the answers to the output's last calls, then
	// a user turn.
	var out struct {
		Messages []struct {
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(res.Conversation, &out))
	var appended []map[string]any
	for _, tc := range out.Messages[len(out.Messages)-1].ToolCalls {
		appended = append(appended, map[string]any{"role": "tool", "tool_call_id": tc.ID, "content": "done"})
	}
	appended = append(appended, map[string]any{"role": "assistant", "content": "The tests pass."},
		map[string]any{"role": "user", "content": "Go on with the fix."})
	msgs, err := json.Marshal(appended)
	require.NoError(t, err)
	inc, _, err := c.Submit(ctx, "go", client.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 200000,
		Base: &client.Base{RunID: res.RunID, SHA256: res.OutputSHA256}, Messages: msgs, WaitSeconds: 120})
	require.NoError(t, err)
	require.Equal(t, "succeeded", inc.Status, inc.Error)
	require.NotEqual(t, res.RunID, inc.RunID)
	require.NotNil(t, inc.Cost)
	require.Equal(t, 1, inc.Cost.Turns, "priced over the one call the event showed since the last compaction")
	require.Equal(t, "observed", inc.Cost.TurnsSource)
	require.NotNil(t, res.Cost)
	require.Equal(t, "default", res.Cost.TurnsSource, "a whole conversation shows no pace: COST_TURNS")

	st, err := c.Status(ctx, "go")
	require.NoError(t, err)
	require.Equal(t, "go", st.Session)
	require.Equal(t, inc.RunID, st.LastRunID)
	require.Equal(t, 2, st.Runs["succeeded"])
	require.Positive(t, st.Offloads)
	ds, err := c.Deliveries(ctx, res.RunID)
	require.NoError(t, err)
	require.Empty(t, ds, "no webhook while the runs ran")
	_, err = c.Redeliver(ctx, "no-such-delivery")
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusNotFound, ae.Status)

	// The audit and operator routes: runs a page at a time and exported,
	// a diff, the watermarks, an inspection, a tool result offloaded and
	// read back, a manual compaction, a bulk replay of no failed run.
	page, err := c.ListRuns(ctx, client.RunFilter{Session: "go", Limit: 1})
	require.NoError(t, err)
	require.Len(t, page.Runs, 1)
	require.Equal(t, inc.RunID, page.Runs[0].ID)
	require.Equal(t, inc.RunID, page.NextAfter)
	page, err = c.ListRuns(ctx, client.RunFilter{Session: "go", After: page.NextAfter})
	require.NoError(t, err)
	require.Len(t, page.Runs, 1)
	require.Equal(t, res.RunID, page.Runs[0].ID)
	require.Equal(t, "offload-compact", page.Runs[0].Preset)
	exported, err := c.Export(ctx, "jsonl", client.RunFilter{Session: "go"}, false)
	require.NoError(t, err)
	require.Len(t, strings.Split(strings.TrimSpace(string(exported)), "\n"), 2)
	diff, err := c.Diff(ctx, res.RunID)
	require.NoError(t, err)
	require.Equal(t, res.RunID, diff.RunID)
	require.NotEmpty(t, diff.Changes)
	require.Positive(t, diff.Replaced, "offloads replace results")
	marks, err := c.Watermarks(ctx, "go")
	require.NoError(t, err)
	require.NotNil(t, marks.Watermarks)
	ins, err := c.Inspect(ctx, "go", client.Inspection{Model: "gpt-4o", ContextLimit: 20000, Preset: "three-tier", Conversation: input})
	require.NoError(t, err)
	require.Equal(t, "openai", ins.Format)
	require.Positive(t, ins.Messages)
	require.NotEmpty(t, ins.Report.Level)
	text := strings.Repeat("a line of a long tool result\n", 3000)
	comp, _, err := c.CompressResult(ctx, client.Compression{Text: text, Mode: "offload", ToolName: "bash", Session: "go-results"})
	require.NoError(t, err)
	require.Equal(t, "offload", comp.Mode)
	require.Contains(t, comp.Reference, comp.ID)
	back, err := c.Recover(ctx, "go-results", comp.ID, "")
	require.NoError(t, err)
	require.Equal(t, text, string(back))
	manual, _, err := c.Compact(ctx, "go-compact", client.Event{Model: "gpt-4o", ContextLimit: 200000, Conversation: input, WaitSeconds: 120})
	require.NoError(t, err)
	require.Equal(t, "succeeded", manual.Status, manual.Error)
	mrun, err := c.WaitRun(ctx, manual.RunID, 0)
	require.NoError(t, err)
	require.Equal(t, "manual", mrun.Run.Trigger)
	none, err := c.ReplayFailed(ctx, client.Replays{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Minute), Statuses: []string{"failed"}})
	require.NoError(t, err)
	require.Empty(t, none, "no run failed")

	// A run over its limit hands off; its replay with a larger limit
	// succeeds and is promoted, once.
	var doc map[string]any
	require.NoError(t, json.Unmarshal(input, &doc))
	all := doc["messages"].([]any)
	for _, tc := range out.Messages[len(out.Messages)-1].ToolCalls {
		all = append(all, map[string]any{"role": "tool", "tool_call_id": tc.ID, "content": "done"})
	}
	doc["messages"] = append(all, map[string]any{"role": "user", "content": buildLog(400)})
	big, err := json.Marshal(doc)
	require.NoError(t, err)
	over, _, err := c.Submit(ctx, "go-over", client.Event{Preset: "three-tier", Model: "gpt-4o", ContextLimit: 8000,
		Conversation: big, WaitSeconds: 120})
	require.NoError(t, err)
	require.Equal(t, "over_limit", over.Status)
	require.NotEmpty(t, over.Handoff, "an over-limit run hands off")
	require.NotEmpty(t, over.HandoffKey)
	sub, err := c.ReplayRun(ctx, over.RunID, client.Replay{RequestID: "go-replay", ContextLimit: 200000})
	require.NoError(t, err)
	require.False(t, sub.Existing)
	again, err := c.ReplayRun(ctx, over.RunID, client.Replay{RequestID: "go-replay", ContextLimit: 200000})
	require.NoError(t, err)
	require.Equal(t, client.Submitted{RunID: sub.RunID, Existing: true, StatusURL: sub.StatusURL}, *again)
	replay, err := c.WaitRun(ctx, sub.RunID, time.Minute)
	require.NoError(t, err)
	require.Equal(t, "succeeded", replay.Run.Status, replay.Run.Error)
	require.Equal(t, over.RunID, replay.Run.ReplayOf)
	p, err := c.Promote(ctx, sub.RunID)
	require.NoError(t, err)
	require.Equal(t, sub.RunID, p.RunID)
	require.Equal(t, over.RunID, p.ReplayOf)
	require.False(t, p.Existing)
	p, err = c.Promote(ctx, sub.RunID)
	require.NoError(t, err)
	require.True(t, p.Existing, "promoting again answers the same promotion")
	_, err = c.Promote(ctx, res.RunID)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusConflict, ae.Status)
	require.Equal(t, "run", ae.Field, "not a replay")
	st, err = c.Status(ctx, "go-over")
	require.NoError(t, err)
	require.Equal(t, sub.RunID, st.LastRunID)
	require.Len(t, st.Promotions, 1)

	// A session erased: its tombstone, then 410 naming the erasure.
	_, _, err = c.Submit(ctx, "go-erase", client.Event{Preset: "offload-compact", Model: "gpt-4o", Conversation: input, WaitSeconds: 120})
	require.NoError(t, err)
	e, err := c.EraseSession(ctx, "go-erase")
	require.NoError(t, err)
	require.Equal(t, "go-erase", e.Session)
	require.Eventually(t, func() bool {
		e, err = c.Erasure(ctx, e.ID)
		require.NoError(t, err)
		return e.Status == "erased"
	}, 3*time.Minute, 200*time.Millisecond)
	require.Equal(t, 1, e.Runs)
	require.NotNil(t, e.FinishedAt)
	_, err = c.Status(ctx, "go-erase")
	var gone *client.GoneError
	require.ErrorAs(t, err, &gone)
	require.Equal(t, e.ID, gone.Err.ErasureID)
	require.NotNil(t, gone.Err.ErasedAt)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusGone, ae.Status)

	// The retention, set and unset.
	r, err := c.Retention(ctx)
	require.NoError(t, err)
	require.Equal(t, client.Retention{}, r)
	r, err = c.SetRetention(ctx, 3650)
	require.NoError(t, err)
	require.Equal(t, client.Retention{Days: 3650, Set: true}, r)
	r, err = c.Retention(ctx)
	require.NoError(t, err)
	require.Equal(t, client.Retention{Days: 3650, Set: true}, r)
	r, err = c.UnsetRetention(ctx)
	require.NoError(t, err)
	require.Equal(t, client.Retention{}, r)
	r, err = c.Retention(ctx)
	require.NoError(t, err)
	require.Equal(t, client.Retention{}, r)

	// A webhook registered twice is one endpoint; listed, rotated, deleted.
	w, created, err := c.AddWebhook(ctx, hook.url, "go client")
	require.NoError(t, err)
	require.True(t, created)
	require.True(t, strings.HasPrefix(w.Secret, "whsec_"))
	w2, created, err := c.AddWebhook(ctx, hook.url, "")
	require.NoError(t, err)
	require.False(t, created, "the URL is registered already")
	require.Equal(t, w.ID, w2.ID)
	require.Empty(t, w2.Secret)
	ws, err := c.Webhooks(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, w.ID, ws[0].ID)
	require.Empty(t, ws[0].Secret)
	rot, err := c.RotateWebhook(ctx, w.ID)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(rot.Secret, "whsec_"))
	require.NotEqual(t, w.Secret, rot.Secret)
	require.NotNil(t, rot.PreviousExpiresAt)
	require.NoError(t, c.DeleteWebhook(ctx, w.ID))
	ws, err = c.Webhooks(ctx)
	require.NoError(t, err)
	require.Empty(t, ws)
	err = c.DeleteWebhook(ctx, w.ID)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusNotFound, ae.Status)
}

// TestClientsPythonInstall: the Python client installs offline, as its
// README says: pip, in a fresh virtual environment, with --no-index (its
// build backend is in the package, standard library only), then imports
// from the environment; the build leaves nothing in the repository.
func TestClientsPythonInstall(t *testing.T) {
	t.Parallel()
	python, _ := clientTools(t)
	venv := filepath.Join(t.TempDir(), "venv")
	runScript(t, nil, python, "-m", "venv", venv)
	runScript(t, []string{"PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1"},
		filepath.Join(venv, "bin", "pip"), "install", "--no-index", "./clients/python")
	out := runScript(t, nil, filepath.Join(venv, "bin", "python"), "-c",
		"import ctxcompact; print(ctxcompact.__version__, ctxcompact.__file__)")
	require.Contains(t, out, filepath.Join(venv, "lib"), "imported from the environment, not the repository")
	for _, left := range []string{"build", "dist", "ctxcompact.egg-info", "__pycache__"} {
		require.NoFileExists(t, filepath.Join(repoRoot, "clients/python", left))
		require.NoDirExists(t, filepath.Join(repoRoot, "clients/python", left))
	}
}
