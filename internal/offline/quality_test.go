package offline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/testkit/probe"
)

// realTrajectories are the agent runs of testdata/conversations that
// parse as one conversation each (the SWE-agent runs of two models).
func realTrajectories(t *testing.T) map[string]conversation.Conversation {
	t.Helper()
	files, err := filepath.Glob("../../testdata/conversations/swe-agent-*/*.json")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 10, "the real trajectories of testdata/conversations are missing")
	out := map[string]conversation.Conversation{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		c, err := conversation.ParseAny(data)
		require.NoError(t, err, f)
		out[filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f)] = c
	}
	return out
}

// TestOfflineSummaryQuality holds the offline summarizer to what an
// engineer would write, on every real trajectory cut at three points and
// summarized under each prompt at a session-log block's size and at a
// larger one: no boilerplate line at all, and, of the summarized part's
// probes (probe.Derive, as bench 8 takes them from a whole output), the
// last errors and the last commands kept in the block.
func TestOfflineSummaryQuality(t *testing.T) {
	t.Parallel()
	// tally is one target's counts.
	type tally struct{ errTotal, errKept, cmdTotal, cmdKept, fileTotal, fileKept int }
	targets := []int{4000, 12000}
	by := map[int]*tally{}
	for _, target := range targets {
		by[target] = &tally{}
	}
	var size, blocks, boiler int
	for name, c := range realTrajectories(t) {
		for _, frac := range []int{3, 2} {
			split := len(c.Messages) - len(c.Messages)/frac
			region := c
			region.Messages = c.Messages[:split]
			set := probe.Derive(region, policy.DefaultPinMarkers())
			text := plan.Transcript(c, split, nil)
			for _, prompt := range []string{llm.PromptHistory, llm.PromptSession, llm.PromptBrief} {
				for _, target := range targets {
					r, err := Summarizer{}.Summarize(context.Background(), llm.Request{Prompt: prompt, Text: text, TargetChars: target, ArchiveRef: "s3://bucket/archive"})
					require.NoError(t, err)
					where := fmt.Sprintf("%s cut at %d/%d, %s prompt, target %d", name, split, len(c.Messages), prompt, target)
					bad := Boilerplate(r.Text)
					if os.Getenv("QUALITY_BASELINE") == "" {
						require.Empty(t, bad, "boilerplate in %s", where)
					}
					blocks++
					size += len(r.Text)
					if os.Getenv("QUALITY_SIZES") != "" {
						t.Logf("size %s: %d", where, len(r.Text))
					}
					boiler += len(bad)
					hay := strings.Join(strings.Fields(r.Text), " ")
					has := func(p string) bool { return strings.Contains(hay, strings.Join(strings.Fields(p), " ")) }
					tl := by[target]
					// count tallies the probes of one kind the block holds;
					// QUALITY_MISSES=1 logs the others.
					count := func(what string, probes []string, total, kept *int) {
						for _, p := range probes {
							*total++
							if has(p) {
								*kept++
							} else if os.Getenv("QUALITY_MISSES") != "" {
								t.Logf("missing %s in %s: %.200s", what, where, p)
							}
						}
					}
					count("error", set.Errors, &tl.errTotal, &tl.errKept)
					count("command", set.Commands, &tl.cmdTotal, &tl.cmdKept)
					count("file", set.Artifacts, &tl.fileTotal, &tl.fileKept)
				}
			}
		}
	}
	share := func(k, n int) float64 { return float64(k) / float64(max(n, 1)) }
	t.Logf("%d blocks of %d bytes: boilerplate lines %d", blocks, size, boiler)
	for _, target := range targets {
		tl := by[target]
		t.Logf("at %d characters: last errors kept %.2f (%d/%d), last commands %.2f (%d/%d), files %.2f (%d/%d)", target,
			share(tl.errKept, tl.errTotal), tl.errKept, tl.errTotal, share(tl.cmdKept, tl.cmdTotal), tl.cmdKept, tl.cmdTotal,
			share(tl.fileKept, tl.fileTotal), tl.fileKept, tl.fileTotal)
	}
	// The same 180 blocks came to 1,359,101 bytes before the summarizer
	// dropped its boilerplate (commit 484dd24); what it keeps instead
	// must not make them larger.
	require.LessOrEqual(t, size, 1359101, "the blocks grew")
	// A block of 12,000 characters (3,000 tokens) holds what the agent
	// needs; one of 4,000 (a block at a 20,000-token limit: a sixth of
	// the log's 30%) gives up some of the last errors to the identifiers
	// the drift check requires, and the files it only named.
	big, small := by[12000], by[4000]
	require.GreaterOrEqual(t, share(big.errKept, big.errTotal), 0.9, "last errors kept at 12,000 characters")
	require.GreaterOrEqual(t, share(big.cmdKept, big.cmdTotal), 0.9, "last commands kept at 12,000 characters")
	require.GreaterOrEqual(t, share(big.fileKept, big.fileTotal), 0.95, "files kept at 12,000 characters")
	require.GreaterOrEqual(t, share(small.errKept, small.errTotal), 0.75, "last errors kept at 4,000 characters")
	require.GreaterOrEqual(t, share(small.cmdKept, small.cmdTotal), 0.85, "last commands kept at 4,000 characters")
}

// TestBoilerplate: each kind of line a summary must not write is found,
// and a summary's ordinary lines are not.
func TestBoilerplate(t *testing.T) {
	t.Parallel()
	var paths []string
	for i := range 25 {
		paths = append(paths, fmt.Sprintf("- src/pkg%d/file.go", i))
	}
	for _, tc := range []struct {
		name string
		text string
		want int
	}{
		{"placeholder", "## Debugging & Issues\n- (none found)", 1},
		{"wrapper tags read as paths", "## Technical Context\n- /returncode\n- /output\n- </output>", 3},
		{"JSON fragment of a call", "## Current Status\n- { \"cat ./a.py\"}", 1},
		{"nested reflection", "Reflection of 2 session log blocks: merged\n## Status\n- Reflection of 6 session log blocks: merged", 1},
		{"bare path list past 20", "## Files\n" + strings.Join(paths, "\n"), 5},
		{"one line of 25 paths", "- " + strings.ReplaceAll(strings.Join(paths, ", "), "- ", ""), 1},
		{"ordinary lines", "## Code Changes\n- ./django/static.py: read, edited\n- python test.py → exit 1: ImportError: x\n- The fix: import it inside the method, because of the cycle.", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Len(t, Boilerplate(tc.text), tc.want)
		})
	}
}
