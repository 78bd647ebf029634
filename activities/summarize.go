package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"

	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/offline"
	"github.com/ctxcompact/orchestrator/internal/textcut"
)

// maxSplitDepth bounds how often a context-length error halves the input.
const maxSplitDepth = 3

// heartbeatEvery is how often a summarizer call reports it is alive, well
// inside the workflow's 30s heartbeat timeout.
const heartbeatEvery = 10 * time.Second

// Summarize asks the summarizer for one summary and stores it. A
// context-length error splits the input in halves, summarizes each and
// joins them; other errors are classified once, in llmErr.
func (a *Activities) Summarize(ctx context.Context, in SummarizeInput) (res SummarizeResult, err error) {
	rec := a.begin(ctx, in.Run, in.Step, "llm")
	defer rec.end(&err, &res.Recorded)

	if a.Summarizer == nil {
		return res, config(errNoSummarizer)
	}
	model, err := a.summarizerModel(in)
	if err != nil {
		return res, err
	}
	text, err := a.text(ctx, in.Run.Tenant, in.SourceKey)
	if err != nil {
		return res, err
	}
	context_, err := a.text(ctx, in.Run.Tenant, in.ContextKey)
	if err != nil {
		return res, err
	}
	var missing []string
	if raw, err := a.text(ctx, in.Run.Tenant, in.MissingKey); err != nil {
		return res, err
	} else if raw != "" {
		if err := json.Unmarshal([]byte(raw), &missing); err != nil {
			return res, fmt.Errorf("read missing items: %w", err)
		}
	}
	req := llm.Request{
		Prompt: in.Prompt, Text: text, Context: context_, TargetTokens: in.TargetTokens,
		TargetChars: in.TargetChars, Missing: missing, ArchiveRef: archiveRef(archiveID(in.ArchiveKey)), Model: model,
	}
	callStart := time.Now()
	resp, err := a.summarize(context.WithValue(ctx, tenantKey{}, in.Run.Tenant), req, 0)
	rec.inputSize = int64(len(text))
	if err != nil {
		a.Metrics.Summarizer(a.modelFor(model), string(llm.KindOf(err)), time.Since(callStart), 0, 0)
		return res, llmErr(err)
	}
	a.Metrics.Summarizer(resp.Model, "ok", time.Since(callStart), resp.PromptTokens, resp.CompletionTokens)
	if resp.Model != offline.ExtractiveModel && conversationPrompt(in.Prompt) {
		// An LLM's summary of a conversation: what it copied from tool
		// results and users is quoted as theirs, as the offline summary
		// does (offline.QuoteCopied).
		resp.Text = offline.QuoteCopied(resp.Text, text)
	}
	rec.outputSize, rec.model, rec.promptVersion = int64(len(resp.Text)), resp.Model, resp.PromptVersion
	rec.promptTokens, rec.completionTokens = resp.PromptTokens, resp.CompletionTokens
	key, err := a.putText(ctx, in.Run, "summary", resp.Text)
	if err != nil {
		return res, err
	}
	return SummarizeResult{Key: key, Chars: utf8.RuneCountInString(resp.Text), Model: resp.Model, PromptVersion: resp.PromptVersion}, nil
}

// conversationPrompt reports whether prompt summarizes a conversation
// (not one tool result's output, whose every line is the tool's).
func conversationPrompt(prompt string) bool {
	switch prompt {
	case llm.PromptHistory, llm.PromptBrief, llm.PromptSession, llm.PromptRepair:
		return true
	}
	return false
}

// summarize calls the summarizer within this worker's LLM slots, halving
// the input on a context-length error.
func (a *Activities) summarize(ctx context.Context, req llm.Request, depth int) (llm.Response, error) {
	resp, err := a.callSummarizer(ctx, req)
	var le *llm.Error
	if err == nil || !errors.As(err, &le) || le.Kind != llm.ContextLength || depth >= maxSplitDepth {
		return resp, err
	}
	halves, cerr := textcut.Chunk(req.Text, utf8.RuneCountInString(req.Text)/2+1)
	if cerr != nil || len(halves) < 2 {
		return resp, err
	}
	var parts []string
	var out llm.Response
	for _, h := range halves {
		sub := req
		sub.Text = h
		sub.TargetTokens, sub.TargetChars = req.TargetTokens/len(halves), req.TargetChars/len(halves)
		r, err := a.summarize(ctx, sub, depth+1)
		if err != nil {
			return r, err
		}
		parts = append(parts, strings.TrimSpace(r.Text))
		out.Model, out.PromptVersion = r.Model, r.PromptVersion
		out.PromptTokens += r.PromptTokens
		out.CompletionTokens += r.CompletionTokens
	}
	out.Text = strings.Join(parts, "\n\n")
	return out, nil
}

// callSummarizer makes one provider call holding one of this worker's LLM
// slots. The slot is held around that call only, never while a split
// recurses: a split that held its slot while waiting for more would
// deadlock once every slot is held by a split.
func (a *Activities) callSummarizer(ctx context.Context, req llm.Request) (llm.Response, error) {
	if a.LLMTurns != nil {
		tenant, _ := ctx.Value(tenantKey{}).(string)
		release, err := a.LLMTurns.Acquire(ctx, tenant)
		if err != nil {
			return llm.Response{}, err
		}
		defer release()
	} else if a.LLMSlots != nil {
		select {
		case a.LLMSlots <- struct{}{}:
			defer func() { <-a.LLMSlots }()
		case <-ctx.Done():
			return llm.Response{}, ctx.Err()
		}
	}
	return a.Summarizer.Summarize(ctx, req)
}

// tenantKey carries the tenant of a summarizer call to callSummarizer,
// for its turn at the LLM slots.
type tenantKey struct{}

// heartbeat reports liveness while a long call runs; the returned func
// stops it.
func (a *Activities) heartbeat(ctx context.Context) func() {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}

// summarizerModel is the summarizer model the run's preset asks for ("":
// the worker's): as the workflow gave it, or resolved from the run.
func (a *Activities) summarizerModel(in SummarizeInput) (string, error) {
	if in.SummarizerModel != nil {
		return *in.SummarizerModel, nil
	}
	p, err := a.preset(in.Run)
	if err != nil {
		return "", err
	}
	return p.SummarizerModel, nil
}
