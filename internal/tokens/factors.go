package tokens

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Bounds and fallback of a token factor.
const (
	// MinFactor is the least factor: a factor below 1 would shrink the
	// counts and so remove margin instead of adding it.
	MinFactor = 1.0
	// MaxFactor is the largest factor: no real tokenizer counts three
	// times as many tokens as o200k_base on the text agents send, so a
	// larger value is a typing error (say 12 for 1.2).
	MaxFactor = 3.0
	// DefaultFactor is the factor of a model that no prefix of a Factors
	// matches: an unknown vendor's tokenizer (Llama, Mistral, Qwen, ...)
	// gets the same margin as Gemini and DeepSeek.
	DefaultFactor = 1.15
)

// Factors maps model-name prefixes to safety factors over the token
// counts of the counter the model is measured with (o200k_base for every
// non-OpenAI model, see EncodingForModel). A model's counts are multiplied
// by its factor and rounded up, so that a conversation measured under the
// limit is under it with that margin. Keys are compared without regard to
// case and the longest matching prefix wins, as in Limits.
//
// The factors are a calibrated safety margin, not a tokenizer: the
// vendors' own tokenizers are not available offline, and a factor only
// makes sure that the estimate errs on the side of a smaller conversation.
type Factors map[string]float64

// DefaultFactors returns the built-in factors, as a new map the caller may
// change:
//
//	gpt-, chatgpt, o1, o3, o4, text-embedding: 1 (o200k_base and
//	cl100k_base are these models' own encodings: the counts are exact);
//	claude 1.25; gemini 1.15; deepseek 1.15.
//
// Any other model gets DefaultFactor.
//
// Calibration. Anthropic's tokenizer (Claude 3 and later) splits the same
// text into noticeably more tokens than o200k_base: published comparisons
// of Claude 3.5 Sonnet with GPT-4o on fixed prompts measured about 16%
// more tokens on English prose, 21% on math and 30% on Python code, so
// 1.25 covers prose and most code (raise it for code-only transcripts).
// Gemini's SentencePiece vocabulary (256K) and DeepSeek's byte-level BPE
// (128K) land within about ±15% of o200k_base on English and code, so 1.15
// covers the worst of that range. These numbers are margins chosen from
// such comparisons, not measurements of this deployment's traffic:
// MODEL_TOKEN_FACTORS overrides them.
func DefaultFactors() Factors {
	return Factors{
		"gpt-":           1,
		"chatgpt":        1,
		"o1":             1,
		"o3":             1,
		"o4":             1,
		"text-embedding": 1,
		"claude":         1.25,
		"gemini":         1.15,
		"deepseek":       1.15,
	}
}

// For returns the factor of model and the prefix that chose it: the value
// of the longest key that prefixes the model name, or DefaultFactor and ""
// when none does. Case and a provider prefix ("anthropic/claude-3") are
// ignored, as in Limits.For. The factor is rounded to the nearest
// thousandth, the precision Scale applies it with.
func (f Factors) For(model string) (factor float64, prefix string) {
	m := normalizeModel(model)
	best, factor := -1, DefaultFactor
	for key, v := range f {
		p := strings.ToLower(key)
		// Equal lengths only arise from keys that differ in case; the
		// larger factor wins (the safer one) so the result does not
		// depend on map order.
		if strings.HasPrefix(m, p) && (len(p) > best || len(p) == best && v > factor) {
			best, factor, prefix = len(p), v, key
		}
	}
	return float64(toMilli(factor)) / 1000, prefix
}

// Merge returns a new Factors holding f's entries overridden by over's
// ("built-in factors plus MODEL_TOKEN_FACTORS").
func (f Factors) Merge(over Factors) Factors {
	out := make(Factors, len(f)+len(over))
	for k, v := range f {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// ParseFactors parses a list such as "claude=1.3,my-model=1.1" (the format
// of an environment variable, as ParseLimits) into Factors. Spaces around
// names and values are ignored; an empty string gives empty Factors. An
// entry without "=", with an empty name, a value that is not a number from
// MinFactor to MaxFactor, or a name given twice (ignoring case) is an error
// naming the entry.
func ParseFactors(s string) (Factors, error) {
	return parseList(s, "factors", "model=factor", func(value string) (float64, error) {
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || math.IsNaN(v) || v < MinFactor || v > MaxFactor {
			return 0, fmt.Errorf("factor %q is not a number from %g to %g", value, MinFactor, MaxFactor)
		}
		return v, nil
	})
}

// Scale returns c with every count multiplied by factor, to the nearest
// thousandth, and rounded up: the counter of a model whose own tokenizer
// is not c's encoding (see Factors). Its Name says the margin, as in
// "o200k_base×1.25 (claude)", with "default" for a factor no prefix chose,
// so that every text naming the counter names the margin too. c itself is
// returned when the factor is 1 (exact counts) or c counts characters
// (the ReAct two-layer design's unit, exact by definition). A factor outside MinFactor to
// MaxFactor is an error.
//
// Scale a cached counter, not the other way round: the cache then holds
// the encoding's raw counts, shared by every model, and the margin is
// applied after it, so a count is never read back with another model's
// factor.
func Scale(c Counter, factor float64, prefix string) (Counter, error) {
	if math.IsNaN(factor) || factor < MinFactor || factor > MaxFactor {
		return nil, fmt.Errorf("token factor %g for %q is not from %g to %g", factor, prefix, MinFactor, MaxFactor)
	}
	milli := toMilli(factor)
	if milli == 1000 || c.Name() == Chars {
		return c, nil
	}
	label := prefix
	if label == "" {
		label = "default"
	}
	name := fmt.Sprintf("%s×%s (%s)", c.Name(), strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64), label)
	return scaledCounter{raw: c, milli: milli, name: name}, nil
}

// toMilli is a factor in thousandths. Scaling in integers keeps
// ceil(count × factor) exact: in floating point 10 × 1.1 is
// 11.000000000000002, whose ceiling would add a token.
func toMilli(factor float64) int {
	return int(math.Round(factor * 1000))
}

// scaledCounter multiplies the counts of raw by milli/1000, rounding up.
type scaledCounter struct {
	raw   Counter
	milli int
	name  string
}

// Count returns ceil(raw count × factor).
func (s scaledCounter) Count(text string) int {
	n := s.raw.Count(text)
	return (n*s.milli + 999) / 1000
}

// Name returns the encoding with the factor and the prefix that chose it.
func (s scaledCounter) Name() string { return s.name }
