package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
)

// eraseMarker is planted in the erased session's conversation only.
const eraseMarker = "QUOKKA-ERASE-5521"

type apiErasure struct {
	ID             string   `json:"id"`
	Status         string   `json:"status"`
	Runs           int      `json:"runs"`
	RowsDeleted    int      `json:"rows_deleted"`
	ObjectsDeleted int      `json:"objects_deleted"`
	ObjectsKept    int      `json:"objects_kept"`
	DeletedSHA256  []string `json:"deleted_sha256"`
	RequestedBy    string   `json:"requested_by"`
}

// erase asks for the erasure of session and waits until it is done.
func (a *apiEnv) erase(session string) apiErasure {
	a.t.Helper()
	var e apiErasure
	resp, body := a.call("DELETE", "/v1/sessions/"+session, a.key, nil, &e)
	require.Equal(a.t, http.StatusAccepted, resp.StatusCode, string(body))
	require.Equal(a.t, "erasing", e.Status)
	return a.erasureWhen(e.ID, "erased")
}

func (a *apiEnv) erasureWhen(id, status string) apiErasure {
	a.t.Helper()
	var e apiErasure
	// As long as a run in flight is given: under the whole suite's load,
	// an erasure step lost with a stopped worker is retried only after
	// its heartbeat timeout.
	deadline := time.Now().Add(4 * time.Minute)
	for {
		resp, body := a.call("GET", "/v1/erasures/"+id, a.key, nil, &e)
		if resp.StatusCode == http.StatusOK && e.Status == status {
			return e
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("erasure %s: %d %s\n%s", id, resp.StatusCode, body, a.describeWorkflow(contract.EraseWorkflowID(id)))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// offloadOverrides make offload-compact offload every result above 300
// tokens.
var offloadOverrides = map[string]any{"offload": map[string]any{"trigger_usage": 0, "min_tokens": 300}}

// TestEraseSession: after an erasure, nothing of the session's text can
// be read through any route, from S3 (every object of the tenant is read
// and searched for a marker planted in the conversation) or from
// Postgres (every table is searched); a tombstone says who asked and what
// went; bytes another session of the tenant holds too (an offloaded
// result both conversations have) stay, and that session still reads
// them; another tenant sees nothing of it.
func TestEraseSession(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t)
	ctx := context.Background()
	base := readData(t, "swe-agent-deepseek/django__django-11564.json")
	shared := convtest.SingleLine(20_000)
	doomedConv, err := convtest.AppendResults(base, shared, strings.Repeat("log line mentioning "+eraseMarker+" again\n", 800))
	require.NoError(t, err)
	keptConv, err := convtest.AppendResults(base, shared)
	require.NoError(t, err)

	post := func(session, eventID string, conv []byte) (string, int) {
		var res struct {
			RunID string `json:"run_id"`
		}
		resp, _ := a.call("POST", "/v1/sessions/"+session+"/events", a.key, eventBody(map[string]any{"event_id": eventID,
			"model": "gpt-4o", "context_limit": 200000, "preset": "offload-compact", "overrides": offloadOverrides,
			"wait_seconds": 60}, conv), &res)
		return res.RunID, resp.StatusCode
	}
	doomedRun, code := post("doomed", "doomed-e1", doomedConv)
	require.Equal(t, http.StatusOK, code)
	keptRun, code := post("kept", "kept-e1", keptConv)
	require.Equal(t, http.StatusOK, code)
	var offs struct {
		Offloads []struct {
			ID string `json:"id"`
		} `json:"offloads"`
	}
	resp, _ := a.call("GET", "/v1/sessions/doomed/offloads", a.key, nil, &offs)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.GreaterOrEqual(t, len(offs.Offloads), 2, "the shared and the marked results were offloaded")
	doomedOffload := offs.Offloads[0].ID

	resp, _ = a.call("DELETE", "/v1/sessions/doomed", a.otherKey, nil, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "another tenant cannot erase it")
	resp, _ = a.call("DELETE", "/v1/sessions/never-seen", a.key, nil, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	e := a.erase("doomed")
	require.Equal(t, 1, e.Runs)
	require.Positive(t, e.RowsDeleted)
	require.GreaterOrEqual(t, e.ObjectsDeleted, 3, "its original, its output, its marked offload")
	require.GreaterOrEqual(t, e.ObjectsKept, 1, "the result the kept session holds too")
	require.NotEmpty(t, e.DeletedSHA256)
	require.Contains(t, e.RequestedBy, "api request ")

	// No route reads anything of it: its runs are unknown, and the
	// session's own routes answer 410 with the erasure.
	for _, path := range []string{"/v1/runs/" + doomedRun, "/v1/runs/" + doomedRun + "/output", "/v1/runs/" + doomedRun + "/original"} {
		resp, body := a.call("GET", path, a.key, nil, nil)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s: %s", path, body)
	}
	for _, c := range []struct{ method, path string }{{"GET", "/v1/sessions/doomed/offloads/" + doomedOffload},
		{"GET", "/v1/sessions/doomed/search?q=" + eraseMarker}, {"GET", "/v1/sessions/doomed/offloads"},
		{"GET", "/v1/sessions/doomed/status"}, {"GET", "/v1/runs?session=doomed"}, {"DELETE", "/v1/sessions/doomed"}} {
		var gone struct {
			Error struct {
				Code      string `json:"code"`
				ErasureID string `json:"erasure_id"`
				ErasedAt  string `json:"erased_at"`
			} `json:"error"`
		}
		resp, body := a.call(c.method, c.path, a.key, nil, &gone)
		require.Equal(t, http.StatusGone, resp.StatusCode, "%s %s: %s", c.method, c.path, body)
		require.Equal(t, "gone", gone.Error.Code)
		require.Equal(t, e.ID, gone.Error.ErasureID, "%s %s names the erasure", c.method, c.path)
		require.NotEmpty(t, gone.Error.ErasedAt)
	}

	// Temporal: the session's workflow and the run's executions are
	// deleted (their ids and histories name the session and its events).
	for _, id := range []string{contract.SessionWorkflowID(a.tenant, "doomed"), doomedRun} {
		require.Eventually(t, func() bool {
			_, err := a.env.client.DescribeWorkflowExecution(ctx, id, "")
			var nf *serviceerror.NotFound
			return errors.As(err, &nf)
		}, 2*time.Minute, 500*time.Millisecond, "execution %s is gone from Temporal", id)
	}
	_, err = a.env.client.DescribeWorkflowExecution(ctx, contract.SessionWorkflowID(a.tenant, "kept"), "")
	require.NoError(t, err, "the kept session's workflow stays")

	// The other session reads its own, the shared bytes included.
	resp, _ = a.call("GET", "/v1/runs/"+keptRun+"/output", a.key, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = a.call("GET", "/v1/sessions/kept/offloads", a.key, nil, &offs)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, o := range offs.Offloads {
		resp, body := a.call("GET", "/v1/sessions/kept/offloads/"+o.ID, a.key, nil, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	}

	// S3: every object of the tenant, read and searched.
	prefix, err := blob.TenantPrefix(a.tenant)
	require.NoError(t, err)
	keys, err := a.blob.List(ctx, prefix)
	require.NoError(t, err)
	require.NotEmpty(t, keys, "the kept session's objects")
	for _, k := range keys {
		data, err := a.blob.Get(ctx, k)
		require.NoError(t, err)
		require.NotContains(t, string(data), eraseMarker, "object %s holds the erased text", k)
	}
	// Postgres: every table of the schema, every row as text.
	rows, err := a.store.Pool().Query(ctx, `select table_name from information_schema.tables
		where table_schema = current_schema() and table_type = 'BASE TABLE'`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, tables, "runs")
	for _, table := range tables {
		var n int
		require.NoError(t, a.store.Pool().QueryRow(ctx, "select count(*) from "+pgx.Identifier{table}.Sanitize()+
			" x where x::text like '%' || $1 || '%' or x::text like '%doomed%'", eraseMarker).Scan(&n))
		if table == "session_erasures" {
			require.Equal(t, 1, n, "only the tombstone names the session")
			continue
		}
		require.Zero(t, n, "table %s still holds the erased session", table)
	}
}

// TestEraseWhileARunIsInFlight: the erasure waits for the session's live
// run, refuses new events meanwhile (409 naming the session), survives a
// worker restart, and then erases the run it waited for.
func TestEraseWhileARunIsInFlight(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withLLM(llmtest.WithLatency(500*time.Millisecond)))
	input := readData(t, "swe-agent-deepseek/django__django-11564.json")
	var acc struct {
		RunID string `json:"run_id"`
	}
	resp, body := a.call("POST", "/v1/sessions/busy/events", a.key, eventBody(map[string]any{"event_id": "e1",
		"kind": "manual", "model": "gpt-4o", "context_limit": 60000, "preset": "offload-compact"}, input), &acc)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))

	var e apiErasure
	resp, body = a.call("DELETE", "/v1/sessions/busy", a.key, nil, &e)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	var again apiErasure
	resp, _ = a.call("DELETE", "/v1/sessions/busy", a.key, nil, &again)
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, e.ID, again.ID, "asking twice joins the erasure under way")

	var refused apiError
	resp, body = a.call("POST", "/v1/sessions/busy/events", a.key, eventBody(map[string]any{"event_id": "e2", "model": "gpt-4o"}, input), &refused)
	require.Equal(t, http.StatusConflict, resp.StatusCode, string(body))
	require.Equal(t, "session", refused.Error.Field)

	a.worker.Stop()
	time.Sleep(time.Second)
	a.startWorker()

	// The run ends first (under the whole suite's load it may take a
	// while), then the erasure.
	wctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, err := a.gw.Wait(wctx, acc.RunID)
	require.NoError(t, err)
	done := a.erasureWhen(e.ID, "erased")
	require.Equal(t, 1, done.Runs, "the run it waited for")
	resp, _ = a.call("GET", "/v1/runs/"+acc.RunID, a.key, nil, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	prefix, err := blob.TenantPrefix(a.tenant)
	require.NoError(t, err)
	keys, err := a.blob.List(context.Background(), prefix)
	require.NoError(t, err)
	require.Empty(t, keys, "nothing of the session is left in S3")

	// The session takes events again once erased.
	resp, body = a.call("POST", "/v1/sessions/busy/events", a.key, eventBody(map[string]any{"event_id": "e3", "model": "gpt-4o"}, input), nil)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
}

// TestEraseSessionCLI: `starter session delete` erases a session and
// reports the tombstone's counts; a second time the session is unknown.
func TestEraseSessionCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutLLM())
	bin := buildCommand(t, "starter")
	input := readData(t, "swe-agent-deepseek/django__django-11564.json")
	sub, _ := e.compact(gateway.Event{Session: "cli-doomed", Model: "gpt-4o", Conversation: input})
	run := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"session", "delete", "--tenant=" + e.tenant, "--by=e2e"}, args...)...)
		cmd.Env = auditEnvVars(t, e)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("cli-doomed")
	require.NoError(t, err, out)
	require.Contains(t, out, "erased session cli-doomed: 1 runs")
	_, err = e.store.GetRun(context.Background(), sub.RunID)
	require.Error(t, err, "the run's row is gone")
	out, err = run("cli-doomed")
	require.Error(t, err)
	require.Contains(t, out, "not found")
}

// TestEraseSurvivesAServerKill: the deployment in processes (the stack's
// Temporal server, a worker, a slow summarizer); a session's run is in
// flight when its erasure is asked, and the Temporal server is SIGKILLed
// while the erasure waits, then started again on its files. The run ends,
// then the erasure finishes: the run's rows and objects are gone.
func TestEraseSurvivesAServerKill(t *testing.T) {
	t.Parallel()
	workerBin := buildCommand(t, "worker")
	starterBin := buildCommand(t, "starter")
	llm := llmtest.New(llmtest.WithLatency(2 * time.Second))
	t.Cleanup(llm.Close)
	p := startProcStack(t, "TEMPORAL_TASK_QUEUE=erase-kill", "OPENAI_BASE_URL="+llm.URL(), "OPENAI_API_KEY=test-key")
	st, env, s3 := p.store, p.env, p.s3
	startWorkerProcess(t, workerBin, "worker", env)

	input, err := filepath.Abs(filepath.Join(dataDir, "swe-agent-deepseek/django__django-11564.json"))
	require.NoError(t, err)
	// A manual event forces a history summary on the slow summarizer:
	// the run is in flight while the erasure is asked.
	compact := exec.Command(starterBin, "compact", input, "--tenant", "kill", "--session", "doomed", "--preset", "offload-compact",
		"--limit", "60000", "--json", "--wait", "3m")
	compact.Env = env
	require.NoError(t, compact.Start())
	t.Cleanup(func() {
		_ = compact.Process.Kill()
		_ = compact.Wait()
	})
	require.Eventually(t, func() bool { return len(llm.Calls()) > 0 }, time.Minute, 100*time.Millisecond, "the run is in flight")

	out, err := runCommand(starterBin, env, "session", "delete", "doomed", "--tenant", "kill", "--wait", "0s")
	require.NoError(t, err, out)
	require.Contains(t, out, "still under way", "the erasure waits for the run")
	p.killServer(t)

	var erasedRuns int
	require.Eventually(t, func() bool {
		var finished bool
		err := st.Pool().QueryRow(context.Background(), `select finished_at is not null, runs from session_erasures where tenant_id = 'kill'`).
			Scan(&finished, &erasedRuns)
		return err == nil && finished
	}, 3*time.Minute, 250*time.Millisecond, "the erasure finishes")
	require.Equal(t, 1, erasedRuns, "the run it waited for")
	runs, err := st.ListRuns(context.Background(), store.RunFilter{Tenant: "kill"})
	require.NoError(t, err)
	require.Empty(t, runs)
	objects, err := blob.New(context.Background(), s3)
	require.NoError(t, err)
	keys, err := objects.List(context.Background(), "tenants/kill/")
	require.NoError(t, err)
	require.Empty(t, keys)
}

// describeWorkflow says where a workflow stands, for a failure message:
// its status, pending activities with their attempts and last failures,
// and its last events.
func (a *apiEnv) describeWorkflow(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := a.env.client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return "describe " + id + ": " + err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "workflow %s: %s\n", id, d.GetWorkflowExecutionInfo().GetStatus())
	for _, pa := range d.GetPendingActivities() {
		fmt.Fprintf(&b, "  pending %s: %s attempt %d, last failure %q\n", pa.GetActivityType().GetName(), pa.GetState(),
			pa.GetAttempt(), pa.GetLastFailure().GetMessage())
	}
	it := a.env.client.GetWorkflowHistory(ctx, id, "", false, 0)
	var events []string
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			break
		}
		events = append(events, ev.GetEventType().String())
	}
	if len(events) > 30 {
		events = events[len(events)-30:]
	}
	fmt.Fprintf(&b, "  last events: %s\n", strings.Join(events, ", "))
	return b.String()
}
