package tokens

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultContextLimit is the context window, in tokens, assumed for a model
// that no prefix of a Limits matches.
const DefaultContextLimit = 128000

// Limits says how a model's conversations are measured: its context
// window (Windows) and the safety factor over its token counts (Factors),
// both by model-name prefix. Keys are compared without regard to case;
// the longest matching prefix wins, so "gpt-4o" overrides "gpt-4" for
// "gpt-4o-mini".
//
// The factors travel with the windows so that whatever sizes a
// conversation against a window (plan.NewBudget) gets both from the one
// value the configuration builds (MODEL_CONTEXT_LIMITS and
// MODEL_TOKEN_FACTORS over the defaults).
type Limits struct {
	// Windows maps prefixes to context windows in tokens.
	Windows map[string]int
	// Factors maps prefixes to token-count safety factors; nil means
	// DefaultFactors, so that Limits built from windows alone keep the
	// built-in margins.
	Factors Factors
}

// DefaultLimits returns the context windows the vendors document and
// DefaultFactors, as new maps the caller may change:
//
//	gpt-4o 128,000; gpt-4.1 1,047,576; gpt-4.5 128,000; gpt-5 400,000;
//	gpt-4 8,192 (gpt-4-32k 32,768; gpt-4-turbo 128,000);
//	gpt-3.5-turbo 16,385; o1/o3/o4 200,000 (o1-mini, o1-preview 128,000);
//	claude 200,000; deepseek 128,000 (deepseek-chat and deepseek-reasoner
//	in the current API); gemini 1,048,576.
//
// Any other model gets DefaultContextLimit.
func DefaultLimits() Limits {
	return Limits{Factors: DefaultFactors(), Windows: map[string]int{
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
	}}
}

// For returns the context window of model: the value of the longest key
// of Windows that prefixes the model name, or DefaultContextLimit when none
// does. Case and a provider prefix ("openai/gpt-4o") are ignored; an empty
// key, if present, matches every model and so replaces the fallback.
func (l Limits) For(model string) int {
	m := normalizeModel(model)
	best, limit := -1, DefaultContextLimit
	for prefix, v := range l.Windows {
		p := strings.ToLower(prefix)
		// Equal lengths only arise from keys that differ in case; the
		// smaller value wins so the result does not depend on map order.
		if strings.HasPrefix(m, p) && (len(p) > best || len(p) == best && v < limit) {
			best, limit = len(p), v
		}
	}
	return limit
}

// Factor returns the safety factor over model's token counts and the
// prefix that chose it ("" for DefaultFactor), from Factors or, when it is
// nil, DefaultFactors (see Factors.For).
func (l Limits) Factor(model string) (factor float64, prefix string) {
	if l.Factors == nil {
		return DefaultFactors().For(model)
	}
	return l.Factors.For(model)
}

// Merge returns a new Limits holding l's entries overridden by over's, for
// configuration that adjusts the defaults ("defaults plus LIMITS env").
// Factors stays nil (the defaults) only when both are nil; otherwise a nil
// side counts as DefaultFactors.
func (l Limits) Merge(over Limits) Limits {
	out := Limits{Windows: make(map[string]int, len(l.Windows)+len(over.Windows))}
	for k, v := range l.Windows {
		out.Windows[k] = v
	}
	for k, v := range over.Windows {
		out.Windows[k] = v
	}
	switch {
	case l.Factors == nil && over.Factors == nil:
	case l.Factors == nil:
		out.Factors = DefaultFactors().Merge(over.Factors)
	default:
		out.Factors = l.Factors.Merge(over.Factors)
	}
	return out
}

// ParseLimits parses a list such as "gpt-4o=128000,my-model=32000" (the
// format of an environment variable) into the Windows of a Limits (its
// Factors are nil). Spaces around names and values are ignored; an empty
// string gives no windows. An entry without "=", with an empty name, a
// value that is not a positive integer, or a name given twice (ignoring
// case) is an error naming the entry.
func ParseLimits(s string) (Limits, error) {
	windows, err := parseList(s, "limits", "model=tokens", func(value string) (int, error) {
		n, err := strconv.Atoi(value)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("token limit %q is not a positive integer", value)
		}
		return n, nil
	})
	if err != nil {
		return Limits{}, err
	}
	return Limits{Windows: windows}, nil
}

// parseList parses "name=value,name=value" with parse checking each value;
// what names the list in errors ("limits") and want the form of an entry
// ("model=tokens"). Every error names the entry, by position and text.
func parseList[V any](s, what, want string, parse func(value string) (V, error)) (map[string]V, error) {
	out := map[string]V{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	seen := make(map[string]string)
	for i, entry := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("parse %s entry %d %q: want %s", what, i+1, entry, want)
		}
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if name == "" {
			return nil, fmt.Errorf("parse %s entry %d %q: empty model name", what, i+1, entry)
		}
		v, err := parse(value)
		if err != nil {
			return nil, fmt.Errorf("parse %s entry %d %q: %w", what, i+1, entry, err)
		}
		if prev, dup := seen[strings.ToLower(name)]; dup {
			return nil, fmt.Errorf("parse %s entry %d %q: model %q already given as %q", what, i+1, entry, name, prev)
		}
		seen[strings.ToLower(name)] = name
		out[name] = v
	}
	return out, nil
}
