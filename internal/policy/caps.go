package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// Caps bound what a caller may ask for in a request's overrides. The
// operator's own overrides (preset file, SYNAPSE_COMPACT_*) are not
// bounded: the caps are the operator's, applied on top of the caller's
// values. Zero fields take DefaultCaps' values.
type Caps struct {
	// MaxAttempts bounds history.attempts (summarizer attempts per call).
	MaxAttempts int
	// MaxParallelism bounds large_result.parallelism and
	// global_results.parallelism (summaries in flight for one run).
	MaxParallelism int
	// MinChunkChars is the least large_result.chunk_chars.
	MinChunkChars int
	// MaxRepairPasses bounds drift.repair_passes.
	MaxRepairPasses int
	// MaxTargetTokens bounds history.target_tokens and budget.target_tokens.
	MaxTargetTokens int
	// SummarizerModels may be named in summarizer_model; none by default:
	// the operator's account pays for the summarizer.
	SummarizerModels []string
	// AllowBudgetOptOut lets a caller turn the budget check off.
	AllowBudgetOptOut bool
	// MaxBytes bounds the overrides' JSON; MaxString any string in it;
	// MaxListItems any list in it.
	MaxBytes     int
	MaxString    int
	MaxListItems int
}

// DefaultCaps are the caps of a deployment that sets none.
func DefaultCaps() Caps {
	return Caps{MaxAttempts: 5, MaxParallelism: 16, MinChunkChars: 10000, MaxRepairPasses: 3, MaxTargetTokens: 32000,
		MaxBytes: 16 << 10, MaxString: 200, MaxListItems: 32}
}

// withDefaults fills zero fields from DefaultCaps.
func (c Caps) withDefaults() Caps {
	d := DefaultCaps()
	for _, f := range []struct{ v, def *int }{
		{&c.MaxAttempts, &d.MaxAttempts}, {&c.MaxParallelism, &d.MaxParallelism}, {&c.MinChunkChars, &d.MinChunkChars},
		{&c.MaxRepairPasses, &d.MaxRepairPasses}, {&c.MaxTargetTokens, &d.MaxTargetTokens}, {&c.MaxBytes, &d.MaxBytes},
		{&c.MaxString, &d.MaxString}, {&c.MaxListItems, &d.MaxListItems},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return c
}

// OverrideError names the overrides field a caller may not set as given.
type OverrideError struct {
	// Field is the dotted JSON path, e.g. "history.attempts".
	Field  string
	Reason string
}

func (e *OverrideError) Error() string { return e.Field + ": " + e.Reason }

// callerForbidden are the fields only the operator sets: what names the
// preset, and the unit the budget is measured in.
var callerForbidden = []string{"name", "seed", "description", "encoding", "fixed_overhead"}

// CheckCallerOverrides checks a caller's overrides against caps: known
// fields only, none of the operator's, values within the caps. The first
// problem is returned as an *OverrideError naming the field.
func CheckCallerOverrides(raw json.RawMessage, caps Caps) error {
	caps = caps.withDefaults()
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if len(raw) > caps.MaxBytes {
		return &OverrideError{Field: "overrides", Reason: fmt.Sprintf("%d bytes, at most %d allowed", len(raw), caps.MaxBytes)}
	}
	// The shape first: unknown fields and wrong types, named.
	var p Preset
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return decodeError(err, raw)
	}
	dec = json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree map[string]any
	if err := dec.Decode(&tree); err != nil {
		return &OverrideError{Field: "overrides", Reason: "must be a JSON object"}
	}
	set := map[string]any{}
	flatten("", tree, set)
	paths := make([]string, 0, len(set))
	for k := range set {
		paths = append(paths, k)
	}
	sort.Strings(paths)
	for _, path := range paths {
		if err := checkField(path, set[path], caps); err != nil {
			return err
		}
	}
	return nil
}

// flatten lists the leaves of a JSON object by dotted path.
func flatten(prefix string, v any, out map[string]any) {
	m, ok := v.(map[string]any)
	if !ok {
		out[prefix] = v
		return
	}
	for k, child := range m {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		flatten(path, child, out)
	}
}

func checkField(path string, v any, caps Caps) error {
	top, _, _ := strings.Cut(path, ".")
	if slices.Contains(callerForbidden, top) {
		return &OverrideError{Field: path, Reason: "set by the operator only"}
	}
	switch x := v.(type) {
	case string:
		if len(x) > caps.MaxString {
			return &OverrideError{Field: path, Reason: fmt.Sprintf("%d bytes, at most %d allowed", len(x), caps.MaxString)}
		}
	case []any:
		if len(x) > caps.MaxListItems {
			return &OverrideError{Field: path, Reason: fmt.Sprintf("%d items, at most %d allowed", len(x), caps.MaxListItems)}
		}
		for _, item := range x {
			if s, ok := item.(string); ok && len(s) > caps.MaxString {
				return &OverrideError{Field: path, Reason: fmt.Sprintf("an item of %d bytes, at most %d allowed", len(s), caps.MaxString)}
			}
			if s, ok := item.(string); ok && path == "protection.pin_markers" && strings.TrimSpace(s) == "" {
				return &OverrideError{Field: path, Reason: "an empty marker would pin every message"}
			}
		}
	}
	num := func() (int, bool) {
		n, ok := v.(json.Number)
		if !ok {
			return 0, false
		}
		f, err := n.Float64()
		return int(f), err == nil
	}
	atMost := func(limit int) error {
		if n, ok := num(); ok && n > limit {
			return &OverrideError{Field: path, Reason: fmt.Sprintf("%d is above the cap of %d", n, limit)}
		}
		return nil
	}
	switch path {
	case "history.attempts":
		return atMost(caps.MaxAttempts)
	case "large_result.parallelism", "global_results.parallelism":
		return atMost(caps.MaxParallelism)
	case "drift.repair_passes":
		return atMost(caps.MaxRepairPasses)
	case "history.target_tokens", "budget.target_tokens":
		return atMost(caps.MaxTargetTokens)
	case "large_result.chunk_chars":
		if n, ok := num(); ok && n < caps.MinChunkChars {
			return &OverrideError{Field: path, Reason: fmt.Sprintf("%d is below the minimum of %d", n, caps.MinChunkChars)}
		}
	case "summarizer_model":
		if s, _ := v.(string); s != "" && !slices.Contains(caps.SummarizerModels, s) {
			return &OverrideError{Field: path, Reason: fmt.Sprintf("%q is not a model callers may choose (OVERRIDE_SUMMARIZER_MODELS)", s)}
		}
	case "budget.enabled":
		if b, _ := v.(bool); !b && !caps.AllowBudgetOptOut {
			return &OverrideError{Field: path, Reason: "the operator does not let callers turn the budget check off (OVERRIDE_ALLOW_BUDGET_OPT_OUT)"}
		}
	}
	return nil
}

// decodeError names the field of a JSON decoding error.
func decodeError(err error, raw json.RawMessage) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "overrides"
		}
		return &OverrideError{Field: field, Reason: fmt.Sprintf("must be %s, not %s", te.Type, te.Value)}
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return &OverrideError{Field: unknownPath(raw, strings.Trim(name, `"`)), Reason: "unknown field"}
	}
	return &OverrideError{Field: "overrides", Reason: msg}
}

// unknownPath is the dotted path of the unknown field name in the
// overrides raw ("cost.turns", not "turns": the decoder names the key
// alone), found as the first path of raw, in order, that Preset does not
// have and that ends in name; name alone when none does.
func unknownPath(raw json.RawMessage, name string) string {
	var tree map[string]any
	if json.Unmarshal(raw, &tree) != nil {
		return name
	}
	var paths []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			path := k
			if prefix != "" {
				path = prefix + "." + k
			}
			paths = append(paths, path)
			if child, ok := v.(map[string]any); ok {
				walk(path, child)
			}
		}
	}
	walk("", tree)
	sort.Strings(paths)
	for _, path := range paths {
		if (path == name || strings.HasSuffix(path, "."+name)) && !knownField(reflect.TypeFor[Preset](), strings.Split(path, ".")) {
			return path
		}
	}
	return name
}

// knownField reports whether the JSON path segs names a field of t.
func knownField(t reflect.Type, segs []string) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if len(segs) == 0 {
		return true
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "" {
			tag = f.Name
		}
		if strings.EqualFold(tag, segs[0]) {
			return knownField(f.Type, segs[1:])
		}
	}
	return false
}
