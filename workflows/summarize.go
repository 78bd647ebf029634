package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/activities"
)

// llmOptions are for summarizer calls: a heartbeat catches a stuck call
// early, and the attempts are bounded so that a dead LLM ends in the
// fallback instead of waiting forever. The offload-compact design asks for
// 3 attempts with a growing delay; a 429's Retry-After overrides the delay
// (NextRetryDelay).
func llmOptions(attempts int) workflow.ActivityOptions {
	if attempts < 1 {
		attempts = 3
	}
	return workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        time.Minute,
			MaximumAttempts:        int32(attempts),
			NonRetryableErrorTypes: []string{activities.TypeBadInput, activities.TypeConfig, activities.TypeLLMRejected},
		},
	}
}

// summarizerFailed opens a degraded reason of the summarizer's: "the
// summarizer failed", with why its call failed when its error says
// ("the summarizer failed (refused)"), a word, never the error's text.
func summarizerFailed(err error) string {
	if cause := activities.Cause(err); cause != "" {
		return "the summarizer failed (" + cause + ")"
	}
	return "the summarizer failed"
}

// summarizeOrFallback calls the summarizer on the run's LLM task queue;
// when it keeps failing and a fallback mode is given, the no-LLM
// fallback produces the text instead.
func (r *compactionRun) summarizeOrFallback(ctx workflow.Context, in activities.SummarizeInput, attempts int, fallback string) (activities.SummarizeResult, error) {
	var a *activities.Activities
	var out activities.SummarizeResult
	opts := llmOptions(attempts)
	opts.TaskQueue = r.in.LLMTaskQueue
	lctx := workflow.WithActivityOptions(ctx, opts)
	err := r.recording(workflow.ExecuteActivity(lctx, a.Summarize, llmInput(in))).Get(ctx, &out)
	if err == nil || fallback == "" {
		return out, err
	}
	workflow.GetLogger(ctx).Warn("summarizer failed, using fallback", "run", in.Run.ID, "step", in.Step, "fallback", fallback, "error", err)
	r.degrade(summarizerFailed(err) + ": the " + fallback + " fallback wrote a summary instead")
	target := in.TargetChars
	if target == 0 {
		target = in.TargetTokens * 4
	}
	fin := activities.FallbackInput{Run: in.Run, Step: in.Step + "/fallback", SourceKey: in.SourceKey, TargetChars: target, Mode: fallback}
	if activities.StructuredPrompt(in.Prompt) {
		fin.Prompt, fin.ArchiveKey = in.Prompt, in.ArchiveKey
	}
	ferr := r.step(ctx, a.Fallback, fin).Get(ctx, &out)
	return out, ferr
}

// llmInput is a summarizer call's input: the resolved preset's summarizer
// model instead of the whole preset, since a regular activity's input is
// recorded in the history and the call needs nothing else of it.
func llmInput(in activities.SummarizeInput) activities.SummarizeInput {
	if in.Run.Resolved != nil {
		model := in.Run.Resolved.SummarizerModel
		in.SummarizerModel = &model
		in.Run.Resolved = nil
	}
	return in
}

// parallel runs fn for 0..n-1 in workflow coroutines, at most limit at a
// time, and waits for all of them. Coroutines are deterministic, unlike
// goroutines.
func parallel(ctx workflow.Context, n, limit int, fn func(ctx workflow.Context, i int)) {
	if limit < 1 {
		limit = 1
	}
	wg := workflow.NewWaitGroup(ctx)
	slots := workflow.NewBufferedChannel(ctx, limit)
	for i := 0; i < n; i++ {
		wg.Add(1)
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer wg.Done()
			slots.Send(gctx, struct{}{})
			defer slots.Receive(gctx, nil)
			fn(gctx, i)
		})
	}
	wg.Wait(ctx)
}
