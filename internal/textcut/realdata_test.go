package textcut

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// dataDir holds the real agent conversations, copied into the repository
// (testdata/conversations/README.md gives their provenance and licence).
const dataDir = "../../testdata/conversations"

// chatFile is the OpenAI chat shape of the swe-agent files.
type chatFile struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Name    string          `json:"name"`
	} `json:"messages"`
}

// readData reads a file of dataDir. A missing file fails the test: the data
// is part of the repository.
func readData(t testing.TB, rel string) []byte {
	t.Helper()
	path := filepath.Join(dataDir, rel)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("test data %s: %v", path, err)
	}
	return data
}

// largestResult returns the longest string content of a conversation. In
// the swe-agent-gemini files the huge command outputs are role "user"
// messages (the agent's <returncode> feedback), so every role is searched.
func largestResult(t testing.TB, rel string) string {
	t.Helper()
	raw := readData(t, rel)
	var conv chatFile
	require.NoError(t, json.Unmarshal(raw, &conv), "decode %s", rel)
	best := ""
	for i, m := range conv.Messages {
		var s string
		if len(m.Content) == 0 || m.Content[0] != '"' {
			continue
		}
		require.NoError(t, json.Unmarshal(m.Content, &s), "decode content of message %d", i)
		if len(s) > len(best) {
			best = s
		}
	}
	require.NotEmpty(t, best)
	return best
}

func TestRealDjangoExtractiveTenPercent(t *testing.T) {
	t.Parallel()
	text := largestResult(t, "swe-agent-gemini/django__django-15629.json")
	n := utf8.RuneCountInString(text)
	require.Equal(t, 151_582, n, "the README names a 151,582-character result")
	target := n / 10
	out := KeepLines(text, target)
	requireExtract(t, text, target, out)
	require.Greater(t, utf8.RuneCountInString(out), target/2, "the budget is mostly used")

	ret := Retain(text, out)
	base := Retain(text, Truncate(text, target))
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
	text := largestResult(t, "swe-agent-gemini/psf__requests-1142.json")
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
	raw := readData(t, "tau-bench/gpt-4o-airline.json")
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
			requireSubstrings(t, text, Identifiers(text))
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
		text := largestResult(t, rel)
		target := max(utf8.RuneCountInString(text)/10, 200)
		out := KeepLines(text, target)
		requireExtract(t, text, target, out)
		ret := Retain(text, out)
		t.Logf("%s: %d chars → %d, identifiers kept %d/%d", filepath.Base(f), utf8.RuneCountInString(text), utf8.RuneCountInString(out), ret.Kept, ret.Total)
	}
}
