package textcut

import (
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/drift"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
)

// dataDir holds the real agent conversations, copied into the repository
// (testdata/conversations/README.md gives their provenance and licence).
const dataDir = "../../testdata/conversations"

func TestRealDjangoExtractiveTenPercent(t *testing.T) {
	t.Parallel()
	text := convtest.LargestResult(t, "swe-agent-gemini/django__django-15629.json")
	n := utf8.RuneCountInString(text)
	require.Equal(t, 151_582, n, "the README names a 151,582-character result")
	target := n / 10
	out := KeepLines(text, target)
	requireExtract(t, text, target, out)
	require.Greater(t, utf8.RuneCountInString(out), target/2, "the budget is mostly used")

	ret := drift.Retain(text, out)
	base := drift.Retain(text, Truncate(text, target))
	require.Greater(t, ret.Kept, 0)
	t.Logf("extractive %d → %d chars: retention %d/%d (%.0f%%); first-%d-chars baseline %d/%d (%.0f%%)",
		n, utf8.RuneCountInString(out), ret.Kept, ret.Total, 100*ret.Ratio, target, base.Kept, base.Total, 100*base.Ratio)
	for i, id := range ret.Missing {
		if i == 10 {
			t.Logf("… %d more missing", len(ret.Missing)-10)
			break
		}
		t.Logf("missing %s %q", id.Kind, id.Value)
	}
}

func TestRealRequestsChunkReactTwoLayer(t *testing.T) {
	t.Parallel()
	text := convtest.LargestResult(t, "swe-agent-gemini/psf__requests-1142.json")
	require.Equal(t, 868_167, utf8.RuneCountInString(text))
	chunks, err := Chunk(text, 50_000)
	require.NoError(t, err)
	requireChunksValid(t, text, 50_000, chunks)
	minimal := (868_167 + 49_999) / 50_000
	require.LessOrEqual(t, len(chunks), minimal+1, "line boundaries abound, so chunks stay nearly full")
	for i, c := range chunks[:len(chunks)-1] {
		require.True(t, strings.HasSuffix(c, "\n"), "chunk %d ends on a line boundary", i)
	}
	t.Logf("%d chunks (minimal %d)", len(chunks), minimal)
}

// tauTrajectories decodes the tau-bench airline file (its first 20 runs).
func tauTrajectories(t testing.TB) []struct {
	Traj []struct {
		Role    string  `json:"role"`
		Content *string `json:"content"`
		Name    string  `json:"name"`
	} `json:"traj"`
} {
	t.Helper()
	raw := convtest.Read(t, "tau-bench/gpt-4o-airline.json")
	var runs []struct {
		Traj []struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
			Name    string  `json:"name"`
		} `json:"traj"`
	}
	require.NoError(t, json.Unmarshal(raw, &runs))
	return runs
}

func TestRealTauBenchToolResults(t *testing.T) {
	t.Parallel()
	runs := tauTrajectories(t)
	kinds := map[string]int{}
	results := 0
	for _, run := range runs {
		for _, m := range run.Traj {
			if m.Role != "tool" || m.Content == nil {
				continue
			}
			text := *m.Content
			results++
			requireIdentifiersIn(t, text, drift.Identifiers(text))
			out, kind, changed := PostProcess(m.Name, text, false, approxTokens, DefaultPostRules())
			require.Equal(t, out != text, changed)
			require.LessOrEqual(t, approxTokens(out), approxTokens(text), "tool %s, kind %s", m.Name, kind)
			require.LessOrEqual(t, utf8.RuneCountInString(out), utf8.RuneCountInString(text))
			kinds[kind]++
		}
	}
	require.Greater(t, results, 0)
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		t.Logf("%-16s %d", k, kinds[k])
	}
}

func TestRealDeepSeekRetentionOfExtractive(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(dataDir, "swe-agent-deepseek", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no test data in %s/swe-agent-deepseek", dataDir)
	for _, f := range files {
		rel, err := filepath.Rel(dataDir, f)
		require.NoError(t, err)
		text := convtest.LargestResult(t, rel)
		target := max(utf8.RuneCountInString(text)/10, 200)
		out := KeepLines(text, target)
		requireExtract(t, text, target, out)
		ret := drift.Retain(text, out)
		t.Logf("%s: %d chars → %d, identifiers kept %d/%d", filepath.Base(f), utf8.RuneCountInString(text), utf8.RuneCountInString(out), ret.Kept, ret.Total)
	}
}
