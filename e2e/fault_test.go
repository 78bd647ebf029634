package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// runTimeout bounds the wait for any run of these tests, so that a stuck
// run fails the test with a message instead of hanging the package.
const runTimeout = 3 * time.Minute

// llmAttempts is the summarizer attempts of every built-in preset: an
// attempt below it that failed must have been retried.
const llmAttempts = 3

// noWorker leaves the test's task queue without an in-process worker, for
// tests that start their own (another store, or a worker process).
func noWorker() envOption { return func(c *envConfig) { c.noWorker = true } }

// newEnvOnStore is newEnv with st as the store of the gateway and the
// worker, for tests that need control over the store's connections.
func newEnvOnStore(t *testing.T, st *store.Store, opts ...envOption) *env {
	t.Helper()
	e := newEnv(t, append(opts, noWorker())...)
	e.store, e.deps.Store, e.gw.Store = st, st, st
	e.startWorker()
	return e
}

// hugeReact is the ReAct two-layer design's ReAct trajectory with a huge tool result of n
// characters: one map-reduce of n/50,000 chunk summaries.
func hugeReact(t *testing.T, base string, n int) []byte {
	t.Helper()
	text := hugeText(t)
	if n < len(text) {
		text = text[:n]
	}
	return reactFromOpenAI(t, withHugeResult(t, readData(t, base), 30, text))
}

// overrides builds a run's preset overrides from a Go value.
func overrides(t *testing.T, v any) json.RawMessage {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}

// steps lists a run's steps.
func steps(t *testing.T, e *env, runID string) []store.Step {
	t.Helper()
	list, err := e.store.ListSteps(context.Background(), runID)
	require.NoError(t, err)
	return list
}

// stepStart is when an attempt started: the row's time is taken when the
// attempt ends, after its measured duration.
func stepStart(s store.Step) time.Time { return s.At.Add(-s.Duration) }

func stepKey(name string, attempt int) string { return fmt.Sprintf("%s#%d", name, attempt) }

// checkOneRun asserts the session has exactly one run, the one given,
// succeeded, with at most one attempt of its commit step that succeeded.
func checkOneRun(t *testing.T, e *env, session, runID string) {
	t.Helper()
	runs, err := e.store.ListRuns(context.Background(), store.RunFilter{Tenant: e.tenant, Session: session})
	require.NoError(t, err)
	require.Len(t, runs, 1, "one event, one run")
	require.Equal(t, runID, runs[0].ID)
	require.Equal(t, store.RunSucceeded, runs[0].Status, "run error: %s", runs[0].Error)
	commits := 0
	for _, s := range steps(t, e, runID) {
		if s.Name == "commit" && s.Error == "" {
			commits++
		}
	}
	require.LessOrEqual(t, commits, 1, "the run committed at most once")
}

// retryAfterRE finds the Retry-After that llm.Error prints, e.g.
// "(retry after 1s)", in a step's recorded error.
var retryAfterRE = regexp.MustCompile(`\(retry after ([^)]+)\)`)

// checkRetryAfter asserts that every attempt that failed with a 429 was
// retried, and no sooner than the server's Retry-After. list may hold the
// steps of several runs. It returns the Retry-After of each checked retry.
func checkRetryAfter(t *testing.T, list []store.Step) []time.Duration {
	t.Helper()
	byKey := make(map[string]store.Step, len(list))
	for _, s := range list {
		byKey[s.RunID+"/"+stepKey(s.Name, s.Attempt)] = s
	}
	var checked []time.Duration
	for _, s := range list {
		m := retryAfterRE.FindStringSubmatch(s.Error)
		if m == nil {
			continue
		}
		wait, err := time.ParseDuration(m[1])
		require.NoError(t, err, "retry-after in %q", s.Error)
		next, ok := byKey[s.RunID+"/"+stepKey(s.Name, s.Attempt+1)]
		if !ok {
			require.Equal(t, llmAttempts, s.Attempt, "step %s attempt %d failed with a 429 and was not retried", s.Name, s.Attempt)
			continue
		}
		// Both times come from this machine's clock; 50ms covers the
		// rounding of Postgres intervals.
		gap := stepStart(next).Sub(s.At)
		require.GreaterOrEqual(t, gap, wait-50*time.Millisecond,
			"step %s attempt %d retried %s after a 429 asking for %s", s.Name, s.Attempt+1, gap, wait)
		checked = append(checked, wait)
	}
	return checked
}

func TestLLMFailingThirtyPercent(t *testing.T) {
	t.Parallel()
	// The first call gets a 429 asking for 3s, longer than the retry
	// policy's own first delay (1s): a retry 3s later proves Retry-After
	// is honoured, not merely the backoff. Then 30% of calls fail.
	e := newEnv(t, withLLM(
		llmtest.WithScript(llmtest.Fault429{RetryAfter: 3 * time.Second}),
		llmtest.WithFailureRate(0.3, 30),
	))
	runs := []struct {
		session string
		ev      gateway.Event
	}{
		// The thoughts and actions of 11910, which the ReAct two-layer design never cuts, are
		// about 260K characters alone: over the preset's 200K default, so
		// these runs get a limit they can meet.
		{"react-huge", gateway.Event{Preset: "react-two-layer", ContextLimit: 400000,
			Conversation: hugeReact(t, "swe-agent-deepseek/django__django-11742.json", 1<<30)}},
		{"react-large", gateway.Event{Preset: "react-two-layer", ContextLimit: 400000,
			Conversation: hugeReact(t, "swe-agent-deepseek/django__django-11910.json", 400000)}},
		{"auto-12308", gateway.Event{Preset: "auto-summarize", Model: "gpt-4o", ContextLimit: 60000,
			Conversation: readData(t, "swe-agent-deepseek/django__django-12308.json")}},
		{"auto-11564", gateway.Event{Preset: "auto-summarize", Model: "gpt-4o", ContextLimit: 60000,
			Conversation: readData(t, "swe-agent-deepseek/django__django-11564.json")}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	subs := make([]gateway.Submitted, len(runs))
	for i, r := range runs {
		ev := r.ev
		ev.Tenant, ev.Session, ev.EventID = e.tenant, r.session, "ev-"+r.session
		sub, err := e.gw.Submit(ctx, ev)
		require.NoError(t, err, "submit %s", r.session)
		subs[i] = sub
	}

	var all []store.Step
	for i, r := range runs {
		res, err := e.gw.Wait(ctx, subs[i].RunID)
		require.NoError(t, err, "run of session %s", r.session)
		checkRun(t, e, r.ev.Conversation, subs[i], res)
		checkOneRun(t, e, r.session, subs[i].RunID)
		list := steps(t, e, subs[i].RunID)
		var llmSteps int
		for _, s := range list {
			if s.Kind == "llm" {
				llmSteps++
			}
		}
		require.Positive(t, llmSteps, "session %s called the summarizer", r.session)
		all = append(all, list...)
	}

	statuses := map[int]int{}
	for _, c := range e.llm.Calls() {
		statuses[c.Status]++
	}
	require.Positive(t, statuses[429], "429s were injected: %v", statuses)
	require.Positive(t, statuses[500], "500s were injected: %v", statuses)
	require.Positive(t, statuses[200], "calls succeeded: %v", statuses)

	retried := false
	for _, s := range all {
		if s.Kind == "llm" && strings.Contains(s.Name, "summarize") && s.Attempt > 1 {
			retried = true
		}
	}
	require.True(t, retried, "some summarize step needed another attempt")

	waits := checkRetryAfter(t, all)
	t.Logf("summarizer answers %v; %d retries after a 429 checked", statuses, len(waits))
	require.NotEmpty(t, waits, "some 429 was retried")
	require.Contains(t, waits, 3*time.Second, "the scripted 429's retry waited its Retry-After")
}

func TestS3DownForAWhile(t *testing.T) {
	t.Parallel()
	bs, proxy := blobtest.NewBehindProxy(t)
	e := newEnv(t, withBlob(bs))
	input := readData(t, "swe-agent-deepseek/django__django-12308.json")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()

	sub, err := e.gw.Submit(ctx, gateway.Event{Tenant: e.tenant, Session: "s1", EventID: "ev-1",
		Preset: "auto-summarize", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
	require.NoError(t, err)
	// The input is stored; from here on every step reading or writing S3
	// fails until the proxy is up again.
	proxy.Down()
	downAt := time.Now()
	waitFor(t, ctx, 30*time.Second, "a step to fail on the S3 outage", func() bool {
		for _, s := range steps(t, e, sub.RunID) {
			if s.Error != "" {
				return true
			}
		}
		return false
	})
	// Activities retry without an attempt cap; a 5s outage grows their
	// backoff (500ms doubling) to a few seconds, not to its 30s cap.
	time.Sleep(time.Until(downAt.Add(5 * time.Second)))
	require.NoError(t, proxy.Up())

	res, err := e.gw.Wait(ctx, sub.RunID)
	require.NoError(t, err, "run %s", sub.RunID)
	checkRun(t, e, input, sub, res)
	checkOneRun(t, e, "s1", sub.RunID)

	// Every attempt the outage failed was followed by one that succeeded.
	list := steps(t, e, sub.RunID)
	var failures int
	for _, f := range list {
		if f.Error == "" {
			continue
		}
		failures++
		recovered := false
		for _, s := range list {
			if s.Name == f.Name && s.Attempt > f.Attempt && s.Error == "" {
				recovered = true
			}
		}
		require.True(t, recovered, "step %s attempt %d failed (%s) and never succeeded", f.Name, f.Attempt, f.Error)
	}
	require.Positive(t, failures)
}

// withURLParam adds a connection parameter to a postgres:// URL or a
// keyword/value connection string, as storetest's URLs may be either.
func withURLParam(t *testing.T, dsn, key, value string) string {
	t.Helper()
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " " + key + "=" + value
	}
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

func TestPostgresConnectionsDroppedMidRun(t *testing.T) {
	t.Parallel()
	// Postgres is shared by every parallel test, so a restart is
	// simulated by terminating only this test's connections, found by
	// their application_name.
	app := fmt.Sprintf("e2e-pgdrop-%d", time.Now().UnixNano())
	st := storetest.Open(t, withURLParam(t, storetest.NewURL(t), "application_name", app))
	e := newEnvOnStore(t, st, withLLM(llmtest.WithLatency(400*time.Millisecond)))
	input := hugeReact(t, "swe-agent-deepseek/django__django-11742.json", 1<<30)

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	admin, err := pgx.Connect(ctx, storetest.BaseURL())
	require.NoError(t, err)
	defer admin.Close(context.Background())

	sub, err := e.gw.Submit(ctx, gateway.Event{Tenant: e.tenant, Session: "s1", EventID: "ev-1", Preset: "react-two-layer",
		Overrides: overrides(t, map[string]any{"large_result": map[string]any{"parallelism": 4}}), Conversation: input})
	require.NoError(t, err)
	connsBefore := st.Pool().Stat().NewConnsCount()

	// Drop the connections every 600ms while the run is in flight, four
	// times: each failed attempt doubles an activity's backoff, and more
	// drops would only make the test slower.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var rounds, dropped int
	var dropErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(600 * time.Millisecond)
		defer tick.Stop()
		for rounds < 4 {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			var n int
			err := admin.QueryRow(ctx, `select count(pg_terminate_backend(pid)) from pg_stat_activity
				where datname = current_database() and application_name = $1`, app).Scan(&n)
			if err != nil {
				dropErr = err
				return
			}
			if n > 0 {
				rounds++
				dropped += n
			}
		}
	}()
	res, waitErr := e.gw.Wait(ctx, sub.RunID)
	close(stop)
	wg.Wait()
	require.NoError(t, dropErr, "terminate backends")
	require.NoError(t, waitErr, "run %s", sub.RunID)
	require.GreaterOrEqual(t, rounds, 2, "connections were dropped at least twice during the run (%d backends)", dropped)
	require.Greater(t, st.Pool().Stat().NewConnsCount(), connsBefore, "the pool reconnected after the drops")

	// The last drop may have hit idle connections the pool would hand
	// out before noticing; start the checks on fresh ones.
	st.Pool().Reset()
	checkRun(t, e, input, sub, res)
	checkOneRun(t, e, "s1", sub.RunID)
}

func TestDuplicateEventAndQueuedEvents(t *testing.T) {
	t.Parallel()
	// Latency makes each run last over a second (a summary and a repair),
	// so the second event of a session arrives while the first is running.
	e := newEnv(t, withLLM(llmtest.WithLatency(600*time.Millisecond)))
	input := readData(t, "swe-agent-deepseek/django__django-12308.json")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	event := func(session, id string, conv []byte) gateway.Event {
		return gateway.Event{Tenant: e.tenant, Session: session, EventID: id, Preset: "auto-summarize",
			Model: "gpt-4o", ContextLimit: 60000, Conversation: conv}
	}

	t.Run("same event twice is one run", func(t *testing.T) {
		first, err := e.gw.Submit(ctx, event("dup", "ev-dup", input))
		require.NoError(t, err)
		require.False(t, first.Existing)
		again, err := e.gw.Submit(ctx, event("dup", "ev-dup", input))
		require.NoError(t, err)
		require.True(t, again.Existing)
		require.Equal(t, first.RunID, again.RunID)

		res, err := e.gw.Wait(ctx, first.RunID)
		require.NoError(t, err)
		checkRun(t, e, input, first, res)

		// Delivered once more after the run finished: still the same run,
		// and nothing runs again.
		late, err := e.gw.Submit(ctx, event("dup", "ev-dup", input))
		require.NoError(t, err)
		require.Equal(t, first.RunID, late.RunID)
		plans := 0
		for _, s := range steps(t, e, first.RunID) {
			if s.Name == "plan" {
				plans++
			}
		}
		require.Equal(t, 1, plans, "the run was planned once")
		checkOneRun(t, e, "dup", first.RunID)
	})

	t.Run("same event id with another body conflicts", func(t *testing.T) {
		_, err := e.gw.Submit(ctx, event("conflict", "ev-conflict", input))
		require.NoError(t, err)
		other := event("conflict", "ev-conflict", input)
		other.Model = "gpt-4o-mini"
		_, err = e.gw.Submit(ctx, other)
		require.ErrorIs(t, err, gateway.ErrConflict)
		other = event("conflict", "ev-conflict", anthropicWithCheckpoint(2))
		_, err = e.gw.Submit(ctx, other)
		require.ErrorIs(t, err, gateway.ErrConflict)
		// Event ids are the session's: another session's same id is its
		// own event.
		_, err = e.gw.Submit(ctx, event("conflict-2", "ev-conflict", input))
		require.NoError(t, err)
	})

	t.Run("two events of a session run one after the other", func(t *testing.T) {
		second := readData(t, "swe-agent-deepseek/django__django-11564.json")
		a, err := e.gw.Submit(ctx, event("queue", "ev-a", input))
		require.NoError(t, err)
		b, err := e.gw.Submit(ctx, event("queue", "ev-b", second))
		require.NoError(t, err)
		submittedB := time.Now()
		require.NotEqual(t, a.RunID, b.RunID)

		resA, err := e.gw.Wait(ctx, a.RunID)
		require.NoError(t, err)
		resB, err := e.gw.Wait(ctx, b.RunID)
		require.NoError(t, err)
		checkRun(t, e, input, a, resA)
		checkRun(t, e, second, b, resB)

		commitA := findStep(t, steps(t, e, a.RunID), "commit")
		planB := findStep(t, steps(t, e, b.RunID), "plan")
		require.True(t, submittedB.Before(commitA.At), "the second event arrived while the first run was in flight")
		require.False(t, stepStart(planB).Before(commitA.At),
			"the second run started (%s) after the first committed (%s)", stepStart(planB), commitA.At)

		runs, err := e.store.ListRuns(ctx, store.RunFilter{Tenant: e.tenant, Session: "queue"})
		require.NoError(t, err)
		require.Len(t, runs, 2)
		for _, r := range runs {
			require.Equal(t, store.RunSucceeded, r.Status)
		}
	})
}

// findStep returns the first successful attempt of the named step.
func findStep(t *testing.T, list []store.Step, name string) store.Step {
	t.Helper()
	for _, s := range list {
		if s.Name == name && s.Error == "" {
			return s
		}
	}
	t.Fatalf("no successful %s step among %d", name, len(list))
	return store.Step{}
}

// waitFor polls cond every 50ms until it holds, and fails the test when
// it does not within the given time or ctx ends first.
func waitFor(t *testing.T, ctx context.Context, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", within, what)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
