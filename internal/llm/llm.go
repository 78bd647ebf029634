// Package llm is what talks to a model and what prepares for one: the
// Summarizer contract (Request, Response), the client of any
// OpenAI-compatible chat completions endpoint (go-openai), the embedded
// and versioned prompts, the drift judge's schema and its deterministic
// stand-in, and the classification of every error, in one place, so that
// the Temporal activities above can decide what to retry. The offline
// summarizer that needs no model is package offline.
package llm

import (
	"context"
	"fmt"
	"time"
)

// CharsPerToken is the rough ratio used where a target is given in one unit
// and needed in the other (here and by the offline summarizer, package offline).
const CharsPerToken = 4

// Request asks for one summary.
type Request struct {
	// Prompt is the prompt name (see the Prompt* constants).
	Prompt string
	// Text is the content to summarize; it is sent as the user message.
	Text string
	// Context is extra material for the prompt: the turn's thought and
	// action (result), the chunk position (chunk, merge), or the previous
	// summary (repair).
	Context string
	// TargetTokens is the wanted summary length in tokens.
	TargetTokens int
	// TargetChars is the wanted length in characters, used when
	// TargetTokens is 0 (react-two-layer measures in characters).
	TargetChars int
	// Missing lists the items a previous summary omitted (repair only).
	Missing []string
	// ArchiveRef is where the full conversation is archived (session).
	ArchiveRef string
	// Model overrides Config.Model for this request.
	Model string
}

// Validate reports what makes a request unusable, naming the field.
func (r Request) Validate() error {
	if r.Prompt == "" {
		return fmt.Errorf("request.Prompt is empty")
	}
	if _, err := LoadPrompt(r.Prompt); err != nil {
		return fmt.Errorf("request.Prompt: %w", err)
	}
	if r.Text == "" {
		return fmt.Errorf("request.Text is empty: nothing to summarize")
	}
	if r.TargetTokens < 0 || r.TargetChars < 0 {
		return fmt.Errorf("request target is negative (TargetTokens %d, TargetChars %d)", r.TargetTokens, r.TargetChars)
	}
	needsTarget := r.Prompt != PromptBrief
	if needsTarget && r.TargetTokens == 0 && r.TargetChars == 0 {
		return fmt.Errorf("request for prompt %q needs TargetTokens or TargetChars", r.Prompt)
	}
	switch r.Prompt {
	case PromptRepair:
		if len(r.Missing) == 0 {
			return fmt.Errorf("repair request has no Missing items")
		}
		if r.Context == "" {
			return fmt.Errorf("repair request has no Context (the previous summary)")
		}
	case PromptSession:
		if r.ArchiveRef == "" {
			return fmt.Errorf("session request has no ArchiveRef: archive the conversation before summarizing it")
		}
	}
	return nil
}

// Response is one summary and what produced it.
type Response struct {
	// Text is the summary.
	Text string
	// Model is the model that answered ("extractive" offline).
	Model string
	// PromptVersion is the version of the prompt file used, e.g. "chunk-v1".
	PromptVersion string
	// PromptTokens and CompletionTokens are the provider's usage figures
	// (0 offline).
	PromptTokens     int
	CompletionTokens int
	// Offline is true when no LLM was called.
	Offline bool
}

// Summarizer produces summaries. Implementations are safe for concurrent use.
type Summarizer interface {
	// Summarize returns the summary of req.Text; errors are *Error.
	Summarize(ctx context.Context, req Request) (Response, error)
}

// Config configures the OpenAI-compatible summarizer.
type Config struct {
	// BaseURL is the API base, e.g. https://api.openai.com/v1. A deployment
	// without one uses the offline summarizer (offline.Summarizer) instead
	// (app.NewSummarizer).
	BaseURL string
	// APIKey is sent as a bearer token; it may be empty for local servers.
	APIKey string
	// Model is the default model, overridable per request.
	Model string
	// Timeout bounds one HTTP call (default 2 minutes).
	Timeout time.Duration
	// MaxTokensFactor multiplies the target to get max_tokens (default 1.2,
	// offload-compact's 20% margin).
	MaxTokensFactor float64
}

// Defaults for Config.
const (
	DefaultTimeout         = 2 * time.Minute
	DefaultMaxTokensFactor = 1.2
)
