package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/drift"
)

// Inputs built to expose super-linear paths. They assert the usual
// properties; a quadratic regression shows up as a test that no longer
// finishes in reasonable time.
func TestAdversarialInputs(t *testing.T) {
	t.Parallel()
	inputs := map[string]string{
		"one huge line":        strings.Repeat("abc/def.py ", 100_000),
		"one huge word":        strings.Repeat("a", 500_000),
		"unbalanced closers":   "(https://x.org/" + strings.Repeat(")", 100_000),
		"deeply nested JSON":   strings.Repeat(`{"id":1,"a":`, 5000) + "1" + strings.Repeat("}", 5000),
		"many tiny lines":      strings.Repeat("x\n", 200_000),
		"many blank lines":     strings.Repeat("\n", 200_000) + "end",
		"long slash run":       strings.Repeat("/a", 200_000),
		"long digit run":       strings.Repeat("1,000", 100_000),
		"long sentence run":    strings.Repeat("a. ", 150_000),
		"minified JSON array":  "[" + strings.Repeat(`{"k":"v"},`, 50_000) + "{}]",
		"pipes without table":  strings.Repeat("| x\n", 50_000),
		"backticks everywhere": strings.Repeat("`git a` ", 50_000),
	}
	for name, text := range inputs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			chunks, err := Chunk(text, 50_000)
			require.NoError(t, err)
			requireChunksValid(t, text, 50_000, chunks)

			target := utf8.RuneCountInString(text) / 10
			requireExtract(t, text, target, KeepLines(text, target))

			requireIdentifiersIn(t, text, drift.Identifiers(text))

			out, kind, _ := PostProcess("api", text, false, nil, DefaultPostRules())
			require.NotEmpty(t, kind)
			require.LessOrEqual(t, utf8.RuneCountInString(out), utf8.RuneCountInString(text))
		})
	}
}

// requireIdentifiersIn checks that every identifier drift finds in text
// (the ones KeepLines scores its lines by) is a substring of it, once.
func requireIdentifiersIn(t testing.TB, text string, ids []drift.Identifier) {
	t.Helper()
	seen := map[drift.Identifier]bool{}
	for _, id := range ids {
		require.NotEmpty(t, id.Value)
		require.Contains(t, text, id.Value, "identifier %v is not a substring", id)
		require.False(t, seen[id], "duplicate %v", id)
		seen[id] = true
	}
}
