// Package activities implements the compaction steps as Temporal
// activities. They are thin: each loads what it needs from S3, calls the
// pure packages (plan, compress, digest) or the summarizer, writes its
// result back to S3 and records itself in Postgres. Only keys and small
// figures go back to the workflow.
package activities

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/metrics"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// Activities holds the dependencies of every activity. Register a pointer
// to it with a worker; the methods are the activities.
type Activities struct {
	Store      *store.Store
	Blob       *blob.Store
	Summarizer llm.Summarizer
	// Limits are the models' context limits.
	Limits tokens.Limits
	// SummarizerModel is the default summarizer model, recorded on runs.
	SummarizerModel string
	// LLMSlots bounds the summarizer calls in flight in this worker.
	LLMSlots chan struct{}
	// Metrics receive the steps, runs, summarizer calls, drift verdicts
	// and offloads (nil: none).
	Metrics *metrics.Metrics

	// ids caches drift-check sources' identifiers (per worker process).
	ids idCache
	// convs caches parsed working conversations (per worker process).
	convs convCache
	// counts caches token counts by text digest (per worker process).
	counts countCache
}

// countCache is the activities' token-count cache, made on first use.
type countCache struct {
	once  sync.Once
	cache *tokens.CountCache
}

func (c *countCache) get() *tokens.CountCache {
	c.once.Do(func() { c.cache = tokens.NewCountCache(tokens.DefaultCountEntries) })
	return c.cache
}

// preset is a run's resolved preset: the copy the workflow hands on from
// the plan step (contract.Run.Resolved), or, for the plan step itself, the
// built-in numbers under the run's overrides,
// which the gateway made effective (deployment's under the caller's) when
// it started the run.
func (a *Activities) preset(run contract.Run) (policy.Preset, error) {
	if run.Resolved != nil {
		return *run.Resolved, nil
	}
	p, err := policy.Resolve(run.Preset, run.Overrides)
	if err != nil {
		return policy.Preset{}, config(err)
	}
	return p, nil
}

// budget resolves the run's preset and budget together.
func (a *Activities) budget(run contract.Run) (policy.Preset, plan.Budget, error) {
	p, err := a.preset(run)
	if err != nil {
		return p, plan.Budget{}, err
	}
	b, err := plan.NewBudgetCounting(p, run.Model, run.ContextLimit, a.Limits, a.counts.get())
	if err != nil {
		return p, b, badInput(err)
	}
	return p, b, nil
}

// historyBudget is budget for a history step: with the budget ladder's
// settings when ladder is set.
func (a *Activities) historyBudget(run contract.Run, ladder bool) (policy.Preset, plan.Budget, error) {
	p, b, err := a.budget(run)
	if err != nil || !ladder {
		return p, b, err
	}
	return plan.LadderHistoryPreset(p, b), b, nil
}

// unitOf names the unit of a budget's sizes: "chars" for seed 000's
// character counts, else "tokens".
func unitOf(b plan.Budget) string {
	if b.Counter.Name() == tokens.Chars {
		return "chars"
	}
	return "tokens"
}

// get reads an object of the run's tenant. Every read of a run goes
// through it: a key that is not exactly one of the tenant's content keys
// is refused before S3 is asked, whoever put it in the run's input.
func (a *Activities) get(ctx context.Context, tenant, key string) ([]byte, error) {
	if err := blob.CheckOwned(tenant, key); err != nil {
		return nil, badInput(fmt.Errorf("read: %w", err))
	}
	data, err := a.Blob.Get(ctx, key)
	if err != nil {
		return nil, blobErr(fmt.Errorf("read %s: %w", key, err))
	}
	return data, nil
}

// getVerified is get with the content's sha256 checked.
func (a *Activities) getVerified(ctx context.Context, tenant, key, sha string) ([]byte, error) {
	if err := blob.CheckOwned(tenant, key); err != nil {
		return nil, badInput(fmt.Errorf("read: %w", err))
	}
	data, err := a.Blob.GetVerified(ctx, key, sha)
	if err != nil {
		return nil, blobErr(fmt.Errorf("read %s: %w", key, err))
	}
	return data, nil
}

// load reads and parses a working conversation of the tenant, and the
// size of its JSON. One this worker parsed or saved recently is copied
// from the cache without reading its bytes at all (after the same
// ownership check as every read).
func (a *Activities) load(ctx context.Context, tenant, key string) (conversation.Conversation, int64, error) {
	if err := blob.CheckOwned(tenant, key); err != nil {
		return conversation.Conversation{}, 0, badInput(fmt.Errorf("read: %w", err))
	}
	if c, size, ok := a.convs.get(key); ok {
		return c, size, nil
	}
	data, err := a.get(ctx, tenant, key)
	if err != nil {
		return conversation.Conversation{}, 0, err
	}
	c, err := conversation.ParseAny(data)
	if err != nil {
		return conversation.Conversation{}, 0, badInput(fmt.Errorf("parse conversation: %w", err))
	}
	a.convs.add(key, c, int64(len(data)))
	return c, int64(len(data)), nil
}

// save renders and stores a working conversation, content-addressed.
func (a *Activities) save(ctx context.Context, tenant string, c conversation.Conversation) (string, error) {
	data, err := conversation.Render(c)
	if err != nil {
		return "", fmt.Errorf("render conversation: %w", err)
	}
	ref, err := a.Blob.PutContent(ctx, tenant, blob.KindWork, data)
	if err != nil {
		return "", blobErr(err)
	}
	// The cache holds what a parse of the stored bytes gives: an
	// Anthropic rendering merges same-role neighbours, and positions
	// (message, block) that later steps exchange must not depend on
	// whether a step found the conversation cached.
	a.convs.add(ref.Key, c.MergeSameRole(), int64(len(data)))
	return ref.Key, nil
}

// text reads a text object of the tenant; an empty key is an empty text.
func (a *Activities) text(ctx context.Context, tenant, key string) (string, error) {
	if key == "" {
		return "", nil
	}
	if err := blob.CheckOwned(tenant, key); err != nil {
		return "", badInput(fmt.Errorf("read: %w", err))
	}
	text, err := a.Blob.GetString(ctx, key)
	if err != nil {
		return "", blobErr(fmt.Errorf("read %s: %w", key, err))
	}
	return text, nil
}

// putText stores a text content-addressed under kind.
func (a *Activities) putText(ctx context.Context, tenant, kind, text string) (string, error) {
	ref, err := a.Blob.PutContentString(ctx, tenant, kind, text)
	if err != nil {
		return "", blobErr(err)
	}
	return ref.Key, nil
}

// stepRecord is filled by an activity and written by record.
type stepRecord struct {
	kind             string
	inputSize        int64
	outputSize       int64
	promptTokens     int
	completionTokens int
	model            string
	promptVersion    string
	// written is set by a step that wrote its own successful record
	// with its state change (commit), so record does not write it again.
	written bool
}

// attempt is one attempt of a step while it runs: the record it fills
// (the embedded stepRecord) and what end needs to write it.
type attempt struct {
	stepRecord
	a       *Activities
	ctx     context.Context
	run     contract.Run
	name    string
	started time.Time
	stop    func() // stops the heartbeat
}

// begin is every step's prologue: it starts the attempt's clock and its
// heartbeat. Pair it with `defer rec.end(&err, &res.Recorded)`.
func (a *Activities) begin(ctx context.Context, run contract.Run, name, kind string) *attempt {
	return &attempt{stepRecord: stepRecord{kind: kind}, a: a, ctx: ctx, run: run, name: name,
		started: time.Now(), stop: a.heartbeat(ctx)}
}

// row is the attempt's record, ending now.
func (x *attempt) row(stepErr error) store.Step {
	attemptNo := 1
	if activity.IsActivity(x.ctx) {
		attemptNo = int(activity.GetInfo(x.ctx).Attempt)
	}
	st := store.Step{
		RunID: x.run.ID, Name: x.name, Attempt: attemptNo, Kind: x.kind,
		InputSize: x.inputSize, OutputSize: x.outputSize,
		PromptTokens: x.promptTokens, CompletionTokens: x.completionTokens,
		Model: x.model, PromptVersion: x.promptVersion, Duration: time.Since(x.started),
		At: time.Now().UTC(),
		// Drawn once per execution: the retry in end is the same
		// write, an execution after a worker death is a new row.
		Execution: newExecutionID(),
	}
	if stepErr != nil {
		// The row shows the caller the public description; the whole
		// error goes to the log.
		_, st.Error = Describe(stepErr)
		logger(x.ctx).Warn("step failed", "run", x.run.ID, "step", x.name, "attempt", attemptNo, "error", stepErr)
	}
	return st
}

// end stops the heartbeat and appends the attempt to the run's history,
// setting *err to the step's error classified (see classify): every step
// ends with rec.end, so the retry decision for an error nobody classified
// is made here, once. The attempt number comes from Temporal, so a retried
// write of the same attempt adds nothing; a new attempt adds its own row.
// A step that succeeded hands its record back to the workflow in out
// instead, which writes it with the run's end (one round trip for all).
func (x *attempt) end(err *error, out *Recorded) {
	x.stop()
	stepErr := classify(*err)
	*err = stepErr
	st := x.row(stepErr)
	x.a.Metrics.Step(x.kind, st.Attempt, st.Duration, stepErr)
	switch {
	case stepErr == nil && x.written:
		return
	case stepErr == nil && out != nil:
		out.StepRecord = &st
		return
	}
	werr := x.a.Store.RecordStep(x.ctx, st)
	if werr != nil && store.IsRetryable(werr) {
		// The write is idempotent; one more try rides out a dropped
		// connection.
		werr = x.a.Store.RecordStep(x.ctx, st)
	}
	if werr != nil {
		// The step itself succeeded or failed on its own; a lost history
		// row must not turn into a retry of an LLM call.
		logger(x.ctx).Warn("record step", "run", x.run.ID, "step", x.name, "error", werr)
	}
}

// logger returns the activity logger, or a no-op one outside activities
// (unit tests call the methods directly).
func logger(ctx context.Context) interface {
	Info(string, ...interface{})
	Warn(string, ...interface{})
} {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	return nopLogger{}
}

type nopLogger struct{}

func (nopLogger) Info(string, ...interface{}) {}
func (nopLogger) Warn(string, ...interface{}) {}

func mustJSON(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return data
}

var errNoSummarizer = errors.New("no summarizer configured")

// newExecutionID is a random id for one execution of a step.
func newExecutionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
