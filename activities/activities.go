// Package activities implements the compaction steps as Temporal
// activities. They are thin: each loads what it needs from S3, calls the
// pure packages (plan, strategy, drift, textcut) or the summarizer,
// writes its result back to S3 and records itself in Postgres. Only keys
// and small figures go back to the workflow.
package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/metrics"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/pricing"
	"github.com/ctxcompact/orchestrator/internal/ratelimit"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// Activities are the compaction's steps, with what they depend on:
// Postgres, S3, the summarizer. The other domains have structs of their
// own (Erasure, Delivery, Admission), each with only the ports it uses;
// Set gathers them for a worker. Register a pointer to each with a
// worker; the methods are the activities, under their method names,
// which every recorded history holds.
type Activities struct {
	// Store is Postgres (a *store.Store in a worker).
	Store RunStore
	// Blob is S3 (a *blob.Store in a worker).
	Blob       ObjectStore
	Summarizer llm.Summarizer
	// Limits are the models' context limits.
	Limits tokens.Limits
	// SummarizerModel is the default summarizer model, recorded on runs.
	SummarizerModel string
	// LLMSlots bounds the summarizer calls in flight in this worker.
	LLMSlots chan struct{}
	// LLMTurns, when set, bounds them instead and hands a free slot to
	// the tenants in turn (LLM_PARALLELISM slots): the LLM worker takes
	// in more calls than it makes at once, so that a tenant's flood
	// waits here, where another tenant's call is served on its next
	// turn, rather than ahead of it in the task queue.
	LLMTurns *ratelimit.FairSlots
	// Metrics receive the steps, runs, summarizer calls, drift verdicts
	// and offloads (nil: none).
	Metrics *metrics.Metrics
	// KeepIntermediates keeps a final run's intermediate objects in S3
	// (KEEP_INTERMEDIATES, for debugging); by default they are deleted.
	KeepIntermediates bool
	// Hooks tells whether a run's tenant wants its final state told
	// (webhooks; nil: no run tells it). The deliveries themselves are
	// Delivery's.
	Hooks WebhookStore
	// Prices and CostTurns price each run (pricing.Saving); a nil table
	// prices nothing.
	Prices    pricing.Table
	CostTurns int
	// ProviderTokens counts the output of a run over a model it handles
	// with the provider's endpoint (Anthropic's count_tokens for Claude,
	// when ANTHROPIC_API_KEY is set); nil: every size is counted locally.
	ProviderTokens tokens.ProviderCounter

	// ids caches drift-check sources' identifiers (per worker process).
	ids idCache
	// sources caches drift-check sources' comparable form and required
	// identifiers (per worker process).
	sources sourceCache
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

// preset is a run's resolved preset: the snapshot the gateway resolved
// at submit (contract.Run.Resolved), which the workflow hands to every
// step. No step resolves a preset again, so that a preset file or a
// built-in default that changes while a run is live cannot change it.
func (a *Activities) preset(run contract.Run) (policy.Preset, error) {
	if run.Resolved == nil {
		return policy.Preset{}, config(fmt.Errorf("run %s carries no resolved preset", run.ID))
	}
	return *run.Resolved, nil
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

// unitOf names the unit of a budget's sizes: "chars" for the ReAct two-layer design's
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

// save renders and stores a working conversation of run, content-addressed
// under the run's prefix (an intermediate: deleted once the run is final).
func (a *Activities) save(ctx context.Context, run contract.Run, c conversation.Conversation) (string, error) {
	data, err := conversation.Render(c)
	if err != nil {
		return "", fmt.Errorf("render conversation: %w", err)
	}
	ref, err := a.Blob.PutRunContent(ctx, run.Tenant, run.ID, blob.KindWork, data)
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

// putText stores an intermediate text of run, content-addressed under
// kind in the run's prefix.
func (a *Activities) putText(ctx context.Context, run contract.Run, kind, text string) (string, error) {
	ref, err := a.Blob.PutRunContentString(ctx, run.Tenant, run.ID, kind, text)
	if err != nil {
		return "", blobErr(err)
	}
	return ref.Key, nil
}

func mustJSON(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return data
}

var errNoSummarizer = errors.New("no summarizer configured")

// loadWork is a pass step's prologue: the working conversation at key
// (its size recorded on the attempt) and the run's preset and budget.
func (a *Activities) loadWork(ctx context.Context, rec *attempt, run contract.Run, key string) (conversation.Conversation, policy.Preset, plan.Budget, error) {
	conv, size, err := a.load(ctx, run.Tenant, key)
	if err != nil {
		return conversation.Conversation{}, policy.Preset{}, plan.Budget{}, err
	}
	rec.inputSize = size
	p, b, err := a.budget(run)
	if err != nil {
		return conversation.Conversation{}, policy.Preset{}, plan.Budget{}, err
	}
	return conv, p, b, nil
}

// Set is every activity struct of a worker, registered together
// (workflows.Register): the compaction's steps, the erasure's and the
// retention sweep's, the webhook deliveries', admission.
type Set struct {
	Compaction *Activities
	Erasure    *Erasure
	Delivery   *Delivery
	Admission  *Admission
}
