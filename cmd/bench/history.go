package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// Measurement 9, history at scale: the audit listing and a run's writes
// with 1,000 and then 100,000 runs of one tenant in the database. The
// history is loaded with set-based SQL (a few statements per size); the
// measured operations go through the store's own methods.

// historyTenant owns every run of measurement 9.
const historyTenant = "bench-history"

// The shape of the loaded history: a session has historyRunsPerSession
// runs, and historyConcurrent sessions run at a time, their runs
// interleaved (run k belongs to session (k/block)·concurrent + k%concurrent).
const (
	historyRunsPerSession = 50
	historyConcurrent     = 10
	// historyRunGap is the time between two loaded runs' starts.
	historyRunGap = 30 * time.Second
	// historyPage is the page of the listing (the API's default).
	historyPage = store.DefaultListLimit
)

// historyPoint is what measurement 9 found at one size of the history.
type historyPoint struct {
	runs int // runs of the tenant while the listing was measured
	load time.Duration
	// Latencies of audit.Service.Runs (GET /v1/runs) by page.
	newest, deep, session []time.Duration
	// write is one more run's store calls, all of them; calls by call.
	write []time.Duration
	calls map[string][]time.Duration
	// tables are the sizes right after the load (before the writes).
	tables []tableSize
	// plans are EXPLAIN ANALYZE of the listing's queries, by page.
	plans map[string]string
	// resolvedBytes and statsBytes are the JSON each run carries;
	// sharedBuffers is the server's setting.
	resolvedBytes, statsBytes int
	sharedBuffers             string
}

// tableSize is one table with its indexes and TOAST.
type tableSize struct {
	name                 string
	rows                 int64
	total, heap, indexes int64
	indexNames           []string
}

// historyCalls are the store calls of one run, in the order it makes them.
var historyCalls = []string{"SessionBreaker", "SubmitRun", "StartRun", "RecordDrift", "CommitRun"}

// historyPageKinds are the listing's pages, in the order reported.
var historyPageKinds = []string{"newest", "deep", "session"}

// benchHistory is measurement 9: a schema of its own on the bench's
// Postgres (no proxy, no Temporal, no S3), dropped at the end.
func benchHistory(ctx context.Context, st *stack, o options, rep *report) error {
	hs, schema, closeDB, err := openHistoryStore(ctx, st.pgAdmin)
	if err != nil {
		return err
	}
	defer func() {
		if err := closeDB(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: 9.", err)
		}
	}()
	points, err := measureHistory(ctx, hs, o.historySizes, o.historySamples, o.historyWrites)
	if err != nil {
		return err
	}
	reportHistory(rep, points, schema, o)
	return nil
}

// startDatabase is the stack of a bench run whose measurements need
// Postgres alone: its URL and version, nothing started.
func startDatabase(ctx context.Context) (*stack, error) {
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		base = defaultDatabaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		// Not err: url's error quotes the URL, password included.
		return nil, errors.New("DATABASE_URL must be a postgres:// URL with a host")
	}
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres at %s (set DATABASE_URL): %w", u.Host, err)
	}
	defer conn.Close(ctx)
	s := &stack{pgAdmin: base}
	if err := conn.QueryRow(ctx, "show server_version").Scan(&s.pgServer); err != nil {
		return nil, fmt.Errorf("postgres server version: %w", err)
	}
	return s, nil
}

// openHistoryStore creates a fresh schema on the database at base, opens
// the store on it directly and migrates it; closeDB closes the store and
// drops the schema.
func openHistoryStore(ctx context.Context, base string) (*store.Store, string, func() error, error) {
	schemaURL, schema, err := storetest.CreateSchema(ctx, base, "bench_history_")
	if err != nil {
		return nil, "", nil, err
	}
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return storetest.DropSchema(ctx, base, schema)
	}
	hs, err := store.Open(ctx, schemaURL)
	if err != nil {
		return nil, "", nil, errors.Join(fmt.Errorf("open store on %s: %w", schema, err), drop())
	}
	if err := hs.Migrate(ctx); err != nil {
		hs.Close()
		return nil, "", nil, errors.Join(fmt.Errorf("migrate schema %s: %w", schema, err), drop())
	}
	return hs, schema, func() error { hs.Close(); return drop() }, nil
}

// measureHistory grows the tenant's history to each size in turn (set-based
// inserts), then measures the listing, one more run's writes and the
// tables. hs must be a migrated store on a schema of its own.
func measureHistory(ctx context.Context, hs *store.Store, sizes []int, samples, writes int) ([]historyPoint, error) {
	fill, err := newHistoryFill()
	if err != nil {
		return nil, err
	}
	var points []historyPoint
	for i, n := range sizes {
		have, err := tenantRuns(ctx, hs)
		if err != nil {
			return nil, err
		}
		if n < have {
			return nil, fmt.Errorf("history size %d below the %d runs already there", n, have)
		}
		p := historyPoint{runs: n, calls: map[string][]time.Duration{}, plans: map[string]string{},
			resolvedBytes: len(fill.resolved), statsBytes: len(fill.stats)}
		if err := hs.Pool().QueryRow(ctx, `show shared_buffers`).Scan(&p.sharedBuffers); err != nil {
			return nil, fmt.Errorf("shared_buffers: %w", err)
		}
		t0 := time.Now()
		if err := fill.load(ctx, hs, have, n); err != nil {
			return nil, err
		}
		p.load = time.Since(t0)
		if verbose {
			fmt.Fprintf(os.Stderr, "bench:   %d runs loaded in %s\n", n, p.load.Round(time.Millisecond))
		}
		if err := measureListing(ctx, hs, &p, samples, uint64(i)); err != nil {
			return nil, err
		}
		if p.tables, err = tableSizes(ctx, hs); err != nil {
			return nil, err
		}
		if err := measureWrites(ctx, hs, fill, &p, writes, i); err != nil {
			return nil, err
		}
		points = append(points, p)
	}
	return points, nil
}

func tenantRuns(ctx context.Context, hs *store.Store) (int, error) {
	var n int
	if err := hs.Pool().QueryRow(ctx, `select count(*) from runs where tenant_id = $1`, historyTenant).Scan(&n); err != nil {
		return 0, fmt.Errorf("count runs: %w", err)
	}
	return n, nil
}

// historyFill holds the JSON every loaded run carries, as the gateway and
// the commit write it.
type historyFill struct {
	resolved, stats string
	base            time.Time // start of the loaded run 0
}

func newHistoryFill() (historyFill, error) {
	preset, err := policy.Builtin(policy.AutoSummarize)
	if err != nil {
		return historyFill{}, err
	}
	resolved, err := json.Marshal(preset)
	if err != nil {
		return historyFill{}, err
	}
	stats, err := json.Marshal(store.RunStats{
		Stats: contract.Stats{
			Format: "openai", ContextLimit: 128000, Unit: "tokens",
			Recommendation: "continue", ArchiveKey: blob.ContentKey(historyTenant, blob.KindArchive, strings.Repeat("ab", 32)),
			PreservedCount: 12, LevelBefore: "RED", Drift: "passed",
			Passes: []contract.PassStat{
				{Name: "truncate-inputs", Applied: true, Count: 4, TokensSaved: 12000},
				{Name: "dedupe", Applied: false},
				{Name: "summarize-history", Applied: true, Count: 1, TokensSaved: 48000, Note: "turns 3-41 summarized"},
			},
		},
		UsageAfter: 0.48, AgentModel: "gpt-4o", Encoding: "o200k_base",
	})
	if err != nil {
		return historyFill{}, err
	}
	// Loaded runs start 100,000 gaps before now and lie in the past, one
	// gap apart; the runs the bench writes start at now.
	base := time.Now().UTC().Add(-time.Duration(200_000) * historyRunGap).Truncate(time.Second)
	return historyFill{resolved: string(resolved), stats: string(stats), base: base}, nil
}

// SQL expressions of loaded run k (an integer named k), the same in every
// statement so that steps, verdicts and events find their run.
const (
	histRunID   = `'run-' || left(md5($1 || '/' || k), 24)`
	histEvent   = `'ev-' || k`
	histStarted = `$2::timestamptz + k * $4::interval`
	histSHA     = `md5('in/' || k) || md5('put/' || k)`
	histOutSHA  = `md5('out/' || k) || md5('come/' || k)`
)

// histSession is the session of loaded run k (see historyConcurrent).
var histSession = fmt.Sprintf(`'s-' || lpad(((k / %d) * %d + k %% %d)::text, 6, '0')`,
	historyRunsPerSession*historyConcurrent, historyConcurrent, historyConcurrent)

// load adds runs from..to-1 of the tenant, with their sessions, events, 6
// steps each and a drift verdict for a third of them (two for a ninth: a
// failed first check, then the check after repair), in one transaction of
// set-based statements.
func (f historyFill) load(ctx context.Context, hs *store.Store, from, to int) error {
	if to <= from {
		return nil
	}
	args := []any{historyTenant, f.base, from, historyRunGap, to - 1}
	series := ` from generate_series($3::int, $5::int) k`
	keyOf := func(kind, sha string) string {
		return `'tenants/' || $1 || '/` + kind + `/' || left(` + sha + `, 2) || '/' || ` + sha
	}
	stmts := []struct {
		what string
		sql  string
		args []any
	}{
		{"tenant", `insert into tenants (id) values ($1) on conflict do nothing`, args[:1]},
		{"sessions", `insert into sessions (tenant_id, id, created_at)
			select $1, ` + histSession + `, min(` + histStarted + `)` + series + `
			group by 2 on conflict do nothing`, args},
		{"runs", `insert into runs (id, tenant_id, session_id, event_id, trigger, preset, model, prompt_version,
				status, tokens_before, tokens_after, chars_before, chars_after, ratio,
				input_key, archive_key, archive_sha256, output_key, output_sha256, level, error, error_class,
				started_at, finished_at, updated_at, stats, agent_model, context_limit, overrides, input_sha256, resolved_preset)
			select ` + histRunID + `, $1, ` + histSession + `, ` + histEvent + `, 'auto', 'auto-summarize', 'extractive', 'v3',
				st, 90000 + k % 30000, case when st = 'failed' then 0 else 40000 + k % 20000 end,
				360000 + k % 120000, case when st = 'failed' then 0 else 160000 + k % 80000 end,
				case when st = 'failed' then 0 else 0.45 end,
				` + keyOf("archive", histSHA) + `, ` + keyOf("archive", histSHA) + `, ` + histSHA + `,
				case when st = 'failed' then '' else ` + keyOf("output", histOutSHA) + ` end,
				case when st = 'failed' then '' else ` + histOutSHA + ` end,
				case when st = 'failed' then '' else 'YELLOW' end,
				case st when 'failed' then 'the summarizer failed through every retry (429 Too Many Requests)'
					when 'over_limit' then 'the output is still over the model''s limit after every step' else '' end,
				case when st = 'failed' then 'summarizer' else '' end,
				` + histStarted + `, ` + histStarted + ` + interval '2 seconds', ` + histStarted + ` + interval '2 seconds',
				case when st = 'failed' then null else $6::jsonb end, 'gpt-4o', 128000, null, ` + histSHA + `, $7::jsonb
			from (select k, case k % 20 when 7 then 'failed' when 13 then 'over_limit' else 'succeeded' end st` + series + `) r`,
			append(append([]any(nil), args...), f.stats, f.resolved)},
		{"events", `insert into events (tenant_id, event_id, session_id, body_sha256, run_id, created_at)
			select $1, ` + histEvent + `, ` + histSession + `, md5('body/' || k) || md5('hash/' || k), ` + histRunID + `, ` + histStarted + series, args},
		{"run_steps", `insert into run_steps (run_id, name, attempt, kind, input_size, output_size,
				prompt_tokens, completion_tokens, model, prompt_version, duration, error, at, execution)
			select ` + histRunID + `, s.name, 1, s.kind, 360000 + k % 120000, 160000 + k % 80000,
				case when s.kind = 'llm' then 30000 + k % 9000 else 0 end, case when s.kind = 'llm' then 1500 + k % 700 else 0 end,
				case when s.kind = 'llm' then 'extractive' else '' end, case when s.kind = 'llm' then 'v3' else '' end,
				s.ms * interval '1 millisecond', '', ` + histStarted + ` + s.ord * interval '300 milliseconds', left(md5(s.name || '/' || k), 16)
			` + series + ` cross join (values (1, 'plan', 'plan', 5), (2, 'deterministic', 'deterministic', 5),
				(3, 'history/prepare', 'prepare-history', 6), (4, 'history/summarize', 'llm', 1040),
				(5, 'history/drift', 'drift', 25), (6, 'commit', 'commit', 6)) s(ord, name, kind, ms)`, args},
		{"drift_verdicts", `insert into drift_verdicts (run_id, step, pass, score, passed, missing, verdict, created_at)
			select ` + histRunID + `, 'history', p, case when k % 9 = 0 and p = 0 then 0.52 else 0.83 end,
				not (k % 9 = 0 and p = 0),
				case when k % 9 = 0 and p = 0 then array['django/db/models/query.py', 'test_bulk_update', 'ValueError: 42'] else '{}' end,
				case when k % 9 = 0 and p = 0 then 'lost 3 identifiers: repaired' else 'kept 83% of the identifiers' end,
				` + histStarted + ` + interval '1500 milliseconds'
			` + series + ` cross join generate_series(0, 1) p
			where k % 3 = 0 and (p = 0 or k % 9 = 0)`, args},
	}
	err := pgx.BeginFunc(ctx, hs.Pool(), func(tx pgx.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s.sql, s.args...); err != nil {
				return fmt.Errorf("load runs %d-%d: %s: %w", from, to-1, s.what, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// What autovacuum does soon after such a load (an insert-driven
	// vacuum and fresh statistics), done now so that it neither runs
	// during the measurement nor leaves the planner without statistics.
	for _, t := range historyTables {
		if _, err := hs.Pool().Exec(ctx, "vacuum (analyze) "+t); err != nil {
			return fmt.Errorf("vacuum %s: %w", t, err)
		}
	}
	return nil
}

// historyTables are the tables a run's history fills, as reported.
var historyTables = []string{"runs", "run_steps", "drift_verdicts", "events"}

// measureListing times the three pages of the audit listing, the API's
// GET /v1/runs (audit.Service.Runs → store.ListRuns), samples calls each
// after a few warm-up calls, and takes the plan of each query.
func measureListing(ctx context.Context, hs *store.Store, p *historyPoint, samples int, seed uint64) error {
	ids, err := queryStrings(ctx, hs, `select id from runs where tenant_id = $1 order by started_at desc, id desc`, historyTenant)
	if err != nil {
		return fmt.Errorf("read run ids: %w", err)
	}
	sessions, err := queryStrings(ctx, hs, `select id from sessions where tenant_id = $1 order by id`, historyTenant)
	if err != nil {
		return fmt.Errorf("read sessions: %w", err)
	}
	if len(ids) < 2*historyPage || len(sessions) == 0 {
		return fmt.Errorf("history of %d runs in %d sessions is too small for a deep page", len(ids), len(sessions))
	}
	svc := &audit.Service{Store: hs}
	rng := rand.New(rand.NewPCG(seed, 9))
	// A deep page continues after a run in the older half of the
	// history, a different one each call.
	deepCursor := func() string { return ids[len(ids)/2+rng.IntN(max(len(ids)/2-historyPage, 1))] }
	filters := map[string]func() store.RunFilter{
		"newest": func() store.RunFilter { return store.RunFilter{Limit: historyPage} },
		"deep":   func() store.RunFilter { return store.RunFilter{Limit: historyPage, AfterID: deepCursor()} },
		"session": func() store.RunFilter {
			return store.RunFilter{Limit: historyPage, Session: sessions[rng.IntN(len(sessions))]}
		},
	}
	out := map[string]*[]time.Duration{"newest": &p.newest, "deep": &p.deep, "session": &p.session}
	const warmup = 5
	// Interleaved, so that a drift of the machine weighs on each page alike.
	for i := -warmup; i < samples; i++ {
		for _, kind := range historyPageKinds {
			f := filters[kind]()
			t0 := time.Now()
			runs, err := svc.Runs(ctx, historyTenant, f)
			d := time.Since(t0)
			if err != nil {
				return fmt.Errorf("list runs (%s page): %w", kind, err)
			}
			if len(runs) == 0 {
				return fmt.Errorf("list runs (%s page): empty", kind)
			}
			if i >= 0 {
				*out[kind] = append(*out[kind], d)
			}
		}
	}
	// The plans of the queries ListRuns sends (the same text, the select
	// list aside), for the largest pages: a plan that reads more rows
	// than it returns is what would not stay flat.
	explain := map[string][]any{
		"newest": {`select * from runs where tenant_id = $1 order by started_at desc, id desc limit $2`, historyTenant, historyPage},
		"deep": {`select * from runs where tenant_id = $1 and (started_at, id) < (select started_at, id from runs where id = $2)
			order by started_at desc, id desc limit $3`, historyTenant, ids[len(ids)*9/10], historyPage},
		"session": {`select * from runs where tenant_id = $1 and session_id = $2 order by started_at desc, id desc limit $3`,
			historyTenant, sessions[len(sessions)/2], historyPage},
	}
	for kind, q := range explain {
		plan, err := explainPlan(ctx, hs, q[0].(string), q[1:]...)
		if err != nil {
			return fmt.Errorf("explain %s page: %w", kind, err)
		}
		p.plans[kind] = plan
	}
	return nil
}

// queryStrings is the first column of every row of a query.
func queryStrings(ctx context.Context, hs *store.Store, sql string, args ...any) ([]string, error) {
	rows, err := hs.Pool().Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// explainPlan is EXPLAIN ANALYZE of a query, one line, its costs left out.
func explainPlan(ctx context.Context, hs *store.Store, sql string, args ...any) (string, error) {
	lines, err := queryStrings(ctx, hs, `explain (analyze, costs off, timing off, summary off) `+sql, args...)
	if err != nil {
		return "", err
	}
	for i, l := range lines {
		lines[i] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "->"))
	}
	return strings.Join(lines, "; "), nil
}

// measureWrites times one more run's store calls, writes times, each
// run with the loaded runs' JSON (fill): what the
// gateway and the workflow's activities ask of the store for a run that
// compacts with a summary (gateway.Submit: the session's breaker, then
// the claim and the run row; plan: StartRun; the drift check:
// RecordDrift; commit: CommitRun with the run's 6 step records).
func measureWrites(ctx context.Context, hs *store.Store, fill historyFill, p *historyPoint, writes, size int) error {
	sessions, err := queryStrings(ctx, hs, `select id from sessions where tenant_id = $1 order by id`, historyTenant)
	if err != nil {
		return fmt.Errorf("read sessions: %w", err)
	}
	const warmup = 5
	for i := -warmup; i < writes; i++ {
		session := sessions[(i+warmup)%len(sessions)]
		event := fmt.Sprintf("ev-w%d-%d", size, i+warmup)
		runID := gateway.RunID(historyTenant, session, event)
		sum := sha256.Sum256([]byte(runID))
		sha := hex.EncodeToString(sum[:])
		key := blob.ContentKey(historyTenant, blob.KindArchive, sha)
		timings := make(map[string]time.Duration, len(historyCalls))
		timed := func(call string, fn func() error) error {
			t0 := time.Now()
			err := fn()
			timings[call] = time.Since(t0)
			if err != nil {
				return fmt.Errorf("%s of run %s: %w", call, runID, err)
			}
			return nil
		}
		run := store.Run{ID: runID, Tenant: historyTenant, Session: session, EventID: event, Trigger: "auto",
			Preset: policy.AutoSummarize, InputKey: key, Status: store.RunPending, AgentModel: "gpt-4o",
			ContextLimit: 128000, InputSHA256: sha, ResolvedPreset: json.RawMessage(fill.resolved)}
		err := errors.Join(
			timed("SessionBreaker", func() error {
				_, err := hs.SessionBreaker(ctx, historyTenant, session, gateway.DefaultBreaker, time.Now(), "")
				return err
			}),
			timed("SubmitRun", func() error {
				sub, err := hs.SubmitRun(ctx, run, sha, nil)
				if err == nil && (sub.Conflict || sub.Existing) {
					err = fmt.Errorf("not a new claim: %+v", sub)
				}
				return err
			}),
			timed("StartRun", func() error {
				return hs.StartRun(ctx, run.ID, run.Tenant, run.Session, store.RunStart{RunPlan: store.RunPlan{Preset: policy.AutoSummarize,
					Model: "extractive", Level: "RED", TokensBefore: 96000, CharsBefore: 384000}, ArchiveKey: key, ArchiveSHA256: sha})
			}),
			timed("RecordDrift", func() error {
				return hs.RecordDrift(ctx, store.Drift{RunID: runID, Step: "history", Score: 0.83, Passed: true, Verdict: "kept 83% of the identifiers"})
			}),
			timed("CommitRun", func() error {
				committed, err := hs.CommitRun(ctx, runID, store.RunResult{TokensAfter: 43000, CharsAfter: 170000, Ratio: 0.45,
					OutputKey: blob.ContentKey(historyTenant, blob.KindOutput, sha), OutputSHA256: sha, Model: "extractive", PromptVersion: "v3",
					Level: "YELLOW", Stats: json.RawMessage(fill.stats), Steps: runSteps(runID)})
				if err == nil && !committed.Committed {
					err = errors.New("not committed")
				}
				return err
			}),
		)
		if err != nil {
			return err
		}
		if i < 0 {
			continue
		}
		var total time.Duration
		for _, call := range historyCalls {
			total += timings[call]
			p.calls[call] = append(p.calls[call], timings[call])
		}
		p.write = append(p.write, total)
	}
	return nil
}

// runSteps are the step records a run's commit writes: the 6 steps of a
// run that summarizes its history once.
func runSteps(runID string) []store.Step {
	now := time.Now().UTC()
	steps := []store.Step{
		{Name: "plan", Kind: "plan", Duration: 5 * time.Millisecond},
		{Name: "deterministic", Kind: "deterministic", Duration: 5 * time.Millisecond},
		{Name: "history/prepare", Kind: "prepare-history", Duration: 6 * time.Millisecond},
		{Name: "history/summarize", Kind: "llm", Duration: time.Second, PromptTokens: 31000, CompletionTokens: 1800, Model: "extractive", PromptVersion: "v3"},
		{Name: "history/drift", Kind: "drift", Duration: 25 * time.Millisecond},
		{Name: "commit", Kind: "commit", Duration: 6 * time.Millisecond},
	}
	for i := range steps {
		steps[i].RunID, steps[i].Attempt, steps[i].At = runID, 1, now
		steps[i].InputSize, steps[i].OutputSize = 384000, 170000
		steps[i].Execution = randomHex(8)
	}
	return steps
}

// tableSizes reads the size of each history table: all of it (heap,
// TOAST, indexes), its heap and its indexes, with its rows.
func tableSizes(ctx context.Context, hs *store.Store) ([]tableSize, error) {
	var out []tableSize
	for _, t := range historyTables {
		ts := tableSize{name: t}
		err := hs.Pool().QueryRow(ctx, `
			select pg_total_relation_size(c.oid), pg_relation_size(c.oid), pg_indexes_size(c.oid),
				coalesce((select array_agg(indexrelid::regclass::text order by indexrelid::regclass::text) from pg_index where indrelid = c.oid), '{}')
			from pg_class c where c.oid = to_regclass($1)`, t).Scan(&ts.total, &ts.heap, &ts.indexes, &ts.indexNames)
		if err != nil {
			return nil, fmt.Errorf("size of %s: %w", t, err)
		}
		if err := hs.Pool().QueryRow(ctx, "select count(*) from "+pgx.Identifier{t}.Sanitize()).Scan(&ts.rows); err != nil {
			return nil, fmt.Errorf("rows of %s: %w", t, err)
		}
		out = append(out, ts)
	}
	return out, nil
}

// msf prints a short duration in milliseconds with two decimals.
func msf(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000)
}

// mib prints bytes in MiB (KiB below 1 MiB).
func mib(b int64) string {
	if b < 1<<20 {
		return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// ratioOf is b/a of two durations.
func ratioOf(a, b time.Duration) float64 {
	if a <= 0 {
		return 0
	}
	return float64(b) / float64(a)
}

// historyFlat is the largest p50 ratio from the smallest to the largest
// history that still counts as flat.
const historyFlat = 2.0

// reportHistory adds measurement 9's rows: the listing, the writes and
// the tables, each at the largest size compared with the smallest.
func reportHistory(rep *report, points []historyPoint, schema string, o options) {
	if len(points) == 0 {
		return
	}
	small, large := points[0], points[len(points)-1]
	pages := func(p historyPoint) map[string][]time.Duration {
		return map[string][]time.Duration{"newest": p.newest, "deep": p.deep, "session": p.session}
	}
	ps, pl := pages(small), pages(large)
	var value, compared, ratio []string
	flat := true
	for _, kind := range historyPageKinds {
		value = append(value, fmt.Sprintf("%s p50 %s, p99 %s", kind, msf(percentile(pl[kind], 50)), msf(percentile(pl[kind], 99))))
		compared = append(compared, fmt.Sprintf("%s p50 %s, p99 %s", kind, msf(percentile(ps[kind], 50)), msf(percentile(ps[kind], 99))))
		r50 := ratioOf(percentile(ps[kind], 50), percentile(pl[kind], 50))
		r99 := ratioOf(percentile(ps[kind], 99), percentile(pl[kind], 99))
		ratio = append(ratio, fmt.Sprintf("%s p50 ×%.2f, p99 ×%.2f", kind, r50, r99))
		flat = flat && r50 <= historyFlat
	}
	rep.add(row{id: "9", name: fmt.Sprintf("History at scale: run listing (GET /v1/runs: audit Runs → store.ListRuns, %d a page), %s runs of one tenant", historyPage, thousands(large.runs)),
		value:    strings.Join(value, "; ") + fmt.Sprintf(" (%d calls each)", len(large.newest)),
		compared: fmt.Sprintf("%s runs: ", thousands(small.runs)) + strings.Join(compared, "; "),
		ratio:    strings.Join(ratio, "; "),
		target:   fmt.Sprintf("flat: p50 ≤ %.0f× at %d× the runs", historyFlat, large.runs/max(small.runs, 1)),
		met:      metIf(flat)})

	w50 := ratioOf(percentile(small.write, 50), percentile(large.write, 50))
	w99 := ratioOf(percentile(small.write, 99), percentile(large.write, 99))
	rep.add(row{id: "9", name: fmt.Sprintf("History at scale: one more run's store calls (%s), %s runs of one tenant", strings.Join(historyCalls, ", "), thousands(large.runs)),
		value:    fmt.Sprintf("p50 %s, p99 %s (%d runs)", msf(percentile(large.write, 50)), msf(percentile(large.write, 99)), len(large.write)),
		compared: fmt.Sprintf("%s runs: p50 %s, p99 %s", thousands(small.runs), msf(percentile(small.write, 50)), msf(percentile(small.write, 99))),
		ratio:    fmt.Sprintf("p50 ×%.2f, p99 ×%.2f", w50, w99),
		target:   fmt.Sprintf("flat: p50 ≤ %.0f× at %d× the runs", historyFlat, large.runs/max(small.runs, 1)),
		met:      metIf(w50 <= historyFlat)})

	sizes := func(p historyPoint) (string, int64) {
		var parts []string
		var total int64
		for _, t := range p.tables {
			parts = append(parts, fmt.Sprintf("%s %s (%s rows; heap %s, TOAST %s, indexes %s)", t.name, mib(t.total), thousands(int(t.rows)),
				mib(t.heap), mib(t.total-t.heap-t.indexes), mib(t.indexes)))
			total += t.total
		}
		return strings.Join(parts, ", "), total
	}
	sl, tl := sizes(large)
	ss, ts := sizes(small)
	rep.add(row{id: "9", name: fmt.Sprintf("History at scale: tables at %s runs (with TOAST and indexes)", thousands(large.runs)),
		value:    fmt.Sprintf("%s in all, %.1f KiB per run: %s", mib(tl), float64(tl)/float64(large.runs)/1024, sl),
		compared: fmt.Sprintf("%s runs: %s in all, %.1f KiB per run: %s", thousands(small.runs), mib(ts), float64(ts)/float64(small.runs)/1024, ss),
		ratio:    fmt.Sprintf("×%.1f (runs ×%d)", float64(tl)/float64(max(ts, 1)), large.runs/max(small.runs, 1))})

	var calls []string
	for _, p := range points {
		var per []string
		for _, c := range historyCalls {
			per = append(per, fmt.Sprintf("%s %s/%s", c, msf(percentile(p.calls[c], 50)), msf(percentile(p.calls[c], 99))))
		}
		calls = append(calls, fmt.Sprintf("at %s runs %s", thousands(p.runs), strings.Join(per, ", ")))
	}
	var loads []string
	for _, p := range points {
		loads = append(loads, fmt.Sprintf("to %s runs in %s", thousands(p.runs), p.load.Round(100*time.Millisecond)))
	}
	var plans []string
	for _, p := range points {
		var per []string
		for _, kind := range historyPageKinds {
			per = append(per, fmt.Sprintf("%s `%s`", kind, p.plans[kind]))
		}
		plans = append(plans, fmt.Sprintf("at %s runs: %s", thousands(p.runs), strings.Join(per, ", ")))
	}
	var indexes []string
	for _, t := range large.tables {
		indexes = append(indexes, fmt.Sprintf("%s: %s", t.name, strings.Join(t.indexNames, ", ")))
	}
	rep.note("9. History at scale: a schema of its own (%s, dropped at the end) on the same Postgres, opened directly (no proxy; no Temporal, no S3), "+
		"grown to %s runs of one tenant (tenant %s) with set-based SQL (insert … select from generate_series, one transaction per size, then VACUUM (ANALYZE) of each table, as autovacuum would soon after, so that it does not run during the measurement: %s): "+
		"%d-run sessions, %d at a time with their runs interleaved, a run every %s; each run succeeded (failed and over_limit one in 20 each) with the gateway's and the commit's columns filled "+
		"(keys, SHA-256s, the resolved auto-summarize preset and the stats as JSON, %d and %d bytes), its event, 6 step records (plan, deterministic, history/prepare, history/summarize, history/drift, commit) "+
		"and, for one run in 3, a drift verdict (one in 9 a failed first check, then the check after repair). "+
		"Listing: audit.Service.Runs, the GET /v1/runs handler's call (the tenant's cursor check, then store.ListRuns), %d pages each after 5 warm-up calls, the three kinds interleaved: "+
		"the newest page; a deep page, after a cursor drawn each call from the older half of the history (AfterID); the newest page of a session drawn each call. "+
		"Postgres shared_buffers %s (the history tables %s at the largest size: what does not fit is read from the OS page cache). "+
		"Writes: %d runs one after another into sessions of the history, after 5 warm-up runs, with the same JSON, each the store calls a compaction with one summary makes, in its order, "+
		"summed: gateway.Submit's breaker read (store.SessionBreaker, the default rule) and claim (store.SubmitRun: the event, the run row), the plan's store.StartRun, "+
		"the drift check's store.RecordDrift, the commit's store.CommitRun with its 6 step records; p50/p99 by call: %s. "+
		"Tables: pg_total_relation_size (all), pg_relation_size (heap) and pg_indexes_size before the writes, TOAST the rest (with the free-space and visibility maps); indexes: %s. "+
		"Plans (EXPLAIN ANALYZE of ListRuns' query text after the calls, the deep cursor at 90%% depth, a session from the middle): %s.",
		schema, joinInts(o.historySizes), historyTenant, strings.Join(loads, ", "),
		historyRunsPerSession, historyConcurrent, historyRunGap, large.resolvedBytes, large.statsBytes, o.historySamples, large.sharedBuffers, mib(tl), o.historyWrites,
		strings.Join(calls, "; "), strings.Join(indexes, "; "), strings.Join(plans, "; "))
}

// joinInts prints 1000 and 100000 as "1,000 then 100,000".
func joinInts(ns []int) string {
	var parts []string
	for _, n := range ns {
		parts = append(parts, thousands(n))
	}
	return strings.Join(parts, " then ")
}

// thousands prints n with commas between groups of three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
