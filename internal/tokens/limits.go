package tokens

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultContextLimit is the context window, in tokens, assumed for a model
// that no prefix of a Limits matches.
const DefaultContextLimit = 128000

// Limits maps model-name prefixes to context windows in tokens. Keys are
// compared without regard to case; the longest matching prefix wins, so
// "gpt-4o" overrides "gpt-4" for "gpt-4o-mini".
type Limits map[string]int

// DefaultLimits returns the context windows the vendors document, as a new
// map the caller may change:
//
//	gpt-4o 128,000; gpt-4.1 1,047,576; gpt-4.5 128,000; gpt-5 400,000;
//	gpt-4 8,192 (gpt-4-32k 32,768; gpt-4-turbo 128,000);
//	gpt-3.5-turbo 16,385; o1/o3/o4 200,000 (o1-mini, o1-preview 128,000);
//	claude 200,000; deepseek 128,000 (deepseek-chat and deepseek-reasoner
//	in the current API); gemini 1,048,576.
//
// Any other model gets DefaultContextLimit.
func DefaultLimits() Limits {
	return Limits{
		"gpt-4o":        128000,
		"chatgpt-4o":    128000,
		"gpt-4.1":       1047576,
		"gpt-4.5":       128000,
		"gpt-5":         400000,
		"gpt-4":         8192,
		"gpt-4-32k":     32768,
		"gpt-4-turbo":   128000,
		"gpt-3.5-turbo": 16385,
		"o1":            200000,
		"o1-mini":       128000,
		"o1-preview":    128000,
		"o3":            200000,
		"o4":            200000,
		"claude":        200000,
		"deepseek":      128000,
		"gemini":        1048576,
	}
}

// For returns the context window of model: the value of the longest key
// that prefixes the model name, or DefaultContextLimit when none does. Case
// and a provider prefix ("openai/gpt-4o") are ignored; an empty key, if
// present, matches every model and so replaces the fallback.
func (l Limits) For(model string) int {
	m := normalizeModel(model)
	best, limit := -1, DefaultContextLimit
	for prefix, v := range l {
		p := strings.ToLower(prefix)
		// Equal lengths only arise from keys that differ in case; the
		// smaller value wins so the result does not depend on map order.
		if strings.HasPrefix(m, p) && (len(p) > best || len(p) == best && v < limit) {
			best, limit = len(p), v
		}
	}
	return limit
}

// Merge returns a new Limits holding l's entries overridden by over's, for
// configuration that adjusts the defaults ("defaults plus LIMITS env").
func (l Limits) Merge(over Limits) Limits {
	out := make(Limits, len(l)+len(over))
	for k, v := range l {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// ParseLimits parses a list such as "gpt-4o=128000,my-model=32000" (the
// format of an environment variable) into Limits. Spaces around names and
// values are ignored; an empty string gives empty Limits. An entry without
// "=", with an empty name, a value that is not a positive integer, or a name
// given twice (ignoring case) is an error naming the entry.
func ParseLimits(s string) (Limits, error) {
	out := Limits{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	seen := make(map[string]string)
	for i, entry := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("parse limits entry %d %q: want model=tokens", i+1, entry)
		}
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if name == "" {
			return nil, fmt.Errorf("parse limits entry %d %q: empty model name", i+1, entry)
		}
		n, err := strconv.Atoi(value)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("parse limits entry %d %q: token limit %q is not a positive integer", i+1, entry, value)
		}
		if prev, dup := seen[strings.ToLower(name)]; dup {
			return nil, fmt.Errorf("parse limits entry %d %q: model %q already given as %q", i+1, entry, name, prev)
		}
		seen[strings.ToLower(name)] = name
		out[name] = n
	}
	return out, nil
}
