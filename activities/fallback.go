package activities

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/drift"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/offline"
	"github.com/ctxcompact/orchestrator/internal/textcut"
)

// Fallback makes a summary without an LLM: the extractive summarizer, or
// the ReAct two-layer design's first N characters.
func (a *Activities) Fallback(ctx context.Context, in FallbackInput) (res SummarizeResult, err error) {
	rec := a.begin(ctx, in.Run, in.Step, "fallback")
	defer rec.end(&err, &res.Recorded)
	rec.model = in.Mode

	text, err := a.text(ctx, in.Run.Tenant, in.SourceKey)
	if err != nil {
		return res, err
	}
	var out string
	switch in.Mode {
	case "truncate":
		p, err := a.preset(in.Run)
		if err != nil {
			return res, err
		}
		out = textcut.Truncate(text, p.LargeResult.TruncateChars)
	case "extractive":
		var required []drift.Identifier
		if StructuredPrompt(in.Prompt) && strings.TrimSpace(text) != "" {
			// The identifiers it must keep are the drift check's, made
			// once for both (the replacement is checked next).
			cs, err := a.checked(in.SourceKey, text)
			if err != nil {
				return res, err
			}
			required = cs.required
		}
		out, err = structuredFallback(ctx, in, text, required)
		if err != nil {
			return res, err
		}
	default:
		return res, config(fmt.Errorf("unknown fallback mode %q", in.Mode))
	}
	key, err := a.putText(ctx, in.Run, "summary", out)
	if err != nil {
		return res, err
	}
	rec.inputSize, rec.outputSize = int64(len(text)), int64(len(out))
	return SummarizeResult{Key: key, Chars: utf8.RuneCountInString(out), Model: in.Mode, Fallback: in.Mode}, nil
}

// StructuredPrompt reports a prompt whose summary has fixed sections
// (history, session, brief): its fallback fills the same sections.
func StructuredPrompt(prompt string) bool {
	switch prompt {
	case llm.PromptHistory, llm.PromptSession, llm.PromptBrief:
		return true
	}
	return false
}

// structuredFallback is the extractive summary of text: in the sections
// of a structured prompt (history, session, brief) when the input names
// one, the selected lines of textcut.KeepLines otherwise (a tool result).
func structuredFallback(ctx context.Context, in FallbackInput, text string, required []drift.Identifier) (string, error) {
	if !StructuredPrompt(in.Prompt) {
		return textcut.KeepLines(text, max(in.TargetChars, 200)), nil
	}
	if strings.TrimSpace(text) == "" {
		return textcut.KeepLines(text, max(in.TargetChars, 200)), nil
	}
	resp, err := offline.Summarizer{Required: required}.Summarize(ctx, llm.Request{Prompt: in.Prompt, Text: text,
		TargetChars: max(in.TargetChars, 200), ArchiveRef: in.ArchiveKey})
	if err != nil {
		return "", badInput(fmt.Errorf("extractive %s summary: %w", in.Prompt, err))
	}
	return resp.Text, nil
}
