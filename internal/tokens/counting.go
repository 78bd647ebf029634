package tokens

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// How a size was counted: the values of a run's token_counting
// (contract.Outcome.TokenCounting).
const (
	// CountingEncoding: an exact local count, the model family's own
	// tokenizer (o200k_base or cl100k_base for OpenAI models), or
	// characters for the sizes of a preset that counts characters.
	CountingEncoding = "encoding"
	// CountingProvider: the provider's token-counting endpoint
	// (Anthropic's /v1/messages/count_tokens for Claude models).
	CountingProvider = "provider"
	// CountingEstimate: o200k_base times the model family's calibrated
	// safety factor (Factors), for a model whose tokenizer is not
	// available offline and whose provider was not asked or did not
	// answer.
	CountingEstimate = "estimate"
)

// ownEncodingPrefixes are the model families whose tokenizer is one of
// the local encodings (see EncodingForModel): their counts are exact.
var ownEncodingPrefixes = []string{"gpt-", "chatgpt", "o1", "o3", "o4", "text-embedding"}

// OwnEncoding reports whether EncodingForModel(model) is the model's own
// tokenizer (OpenAI models), so that a local count of its text is exact.
// Case, a provider prefix and a fine-tune prefix are ignored.
func OwnEncoding(model string) bool {
	m := normalizeModel(model)
	for _, p := range ownEncodingPrefixes {
		if strings.HasPrefix(m, p) {
			return true
		}
	}
	return false
}

// LocalCounting says how a local counter measures a model's sizes:
// CountingEncoding for characters and for a model whose own tokenizer is
// the encoding, else CountingEstimate (o200k_base and a factor). A factor
// an operator sets on an OpenAI model (MODEL_TOKEN_FACTORS) adds margin
// over an exact count; the count stays "encoding".
func LocalCounting(model, encoding string) string {
	if encoding == Chars || OwnEncoding(model) {
		return CountingEncoding
	}
	return CountingEstimate
}

// IsClaude reports whether model names a Claude model ("claude-…", with
// or without a provider prefix such as "anthropic/"), the family that
// Anthropic's token-counting endpoint counts.
func IsClaude(model string) bool {
	return strings.HasPrefix(normalizeModel(model), "claude")
}

// ErrNoProviderCount is what a ProviderCounter answers for a
// conversation it has no faithful request for (a ReAct trajectory, an
// image in an OpenAI conversation): the local count stands, and it is
// not a failure worth a log line.
var ErrNoProviderCount = errors.New("no provider count for this conversation")

// ProviderCounter counts a whole conversation the way the model's
// provider bills it, over the network (an activity's work, never a
// workflow's). internal/tokens/anthropic implements it for Claude.
type ProviderCounter interface {
	// Handles reports whether the counter counts model's conversations.
	Handles(model string) bool
	// CountConversation returns the input tokens of a request that
	// sends conv to model. Its errors name neither the credentials nor
	// the conversation's text.
	CountConversation(ctx context.Context, model string, conv conversation.Conversation) (int, error)
}

// Measured is a size and how it was counted.
type Measured struct {
	Size int
	// Counting is CountingEncoding, CountingProvider or CountingEstimate.
	Counting string
}

// MeasureConversation is the size of conv for model, the one place that
// decides between the provider's count and the local one: the provider's
// (plus overhead) when p handles the model, the unit is tokens and it
// answers; else local(), counted as LocalCounting says. A provider that
// fails never fails the measure: the local count stands and the error is
// returned beside it, for the caller to log (none for
// ErrNoProviderCount).
func MeasureConversation(ctx context.Context, p ProviderCounter, model, encoding string, overhead int,
	conv conversation.Conversation, local func() int) (Measured, error) {
	fallback := func() Measured { return Measured{Size: local(), Counting: LocalCounting(model, encoding)} }
	if p == nil || encoding == Chars || !p.Handles(model) {
		return fallback(), nil
	}
	n, err := p.CountConversation(ctx, model, conv)
	if errors.Is(err, ErrNoProviderCount) {
		return fallback(), nil
	}
	if err != nil {
		return fallback(), fmt.Errorf("provider token count for %s: %w", model, err)
	}
	return Measured{Size: n + overhead, Counting: CountingProvider}, nil
}
