package webui

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// promotedSession seeds session s1 of tenant A: run-1, run-orig over its
// limit, run-whatif (a replay of it left a what-if) and run-fix (the
// replay that repaired it, promoted), all started at start and after.
func promotedSession(t *testing.T, f *fixture, start time.Time) {
	t.Helper()
	f.addRun(tenantA, "s1", "run-1", store.RunSucceeded, "adaptive", start, 9000, 2000)
	f.addRun(tenantA, "s1", "run-orig", store.RunOverLimit, "adaptive", start.Add(time.Minute), 12000, 11000)
	f.addRunWith(tenantA, "s1", "run-whatif", store.RunSucceeded, "three-tier", start.Add(2*time.Minute), 12000, 7000, runExtras{ReplayOf: "run-orig"})
	f.addRunWith(tenantA, "s1", "run-fix", store.RunSucceeded, "adaptive", start.Add(3*time.Minute), 12000, 4000, runExtras{ReplayOf: "run-orig"})
	_, _, err := f.store.Promote(t.Context(), tenantA, "run-fix", "test")
	require.NoError(t, err)
}

// TestSessionPageShowsThePromotedReplay: a promoted replay is drawn on
// the session's line and marked promoted, not as a what-if "which does
// not change the session's size"; the what-if replay still is one; the
// tables say which run is which; the status figures follow the
// promotion.
func TestSessionPageShowsThePromotedReplay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	promotedSession(t, f, time.Now().UTC().Add(-time.Hour))
	c := f.signIn(f.keyA)

	page := f.get("/ui/sessions/s1", c)
	require.Equal(t, http.StatusOK, page.status, page.body)
	require.Contains(t, page.body, `id="timeline-replays">1 replay is on the plot`, "only the what-if")
	require.Contains(t, page.body, `id="timeline-promoted">1 promoted replay is on the session's line`)
	require.Contains(t, page.body, `(after <a href="/ui/runs/run-fix">run-fix</a>)`, "the session's state is the promoted replay")
	row := func(id string) string {
		_, after, ok := strings.Cut(page.body, `data-run="`+id+`"`)
		require.True(t, ok, id)
		r, _, _ := strings.Cut(after, "</tr>")
		return r
	}
	require.Contains(t, row("run-fix"), `<span class="tag">promoted replay</span>`)
	require.NotContains(t, row("run-fix"), `<span class="tag">replay</span>`)
	require.Contains(t, row("run-whatif"), `<span class="tag">replay</span>`)
	require.Contains(t, row("run-orig"), "replaced by a promoted replay")
	require.NotContains(t, row("run-1"), `class="tag"`)
	_, history, ok := strings.Cut(page.body, `id="history"`)
	require.True(t, ok)
	for _, want := range []string{"run-fix</a> <span class=\"tag\">promoted replay</span>", "run-whatif</a> <span class=\"tag\">replay (what-if)</span>",
		"run-orig</a> <span class=\"tag\">replaced by its promoted replay</span>"} {
		require.Contains(t, history, want)
	}

	texts := svgTexts(t, []byte(f.get("/ui/sessions/s1/timeline.svg", c).body))
	for _, want := range []string{"#1", "#2", "#3 replay", "#4 promoted", "replay (what-if)", "4,000 GREEN"} {
		require.Contains(t, texts, want)
	}
	require.NotContains(t, texts, "#4 replay")

	run := f.get("/ui/runs/run-fix", c)
	require.Contains(t, run.body, `id="replay-of">promoted replay of <a href="/ui/runs/run-orig">`)
	require.Contains(t, run.body, `id="promoted"`)
	require.NotContains(t, run.body, `id="what-if"`)
	require.Contains(t, f.get("/ui/runs/run-whatif", c).body, `id="what-if"`)
	require.Contains(t, f.get("/ui/runs/run-orig", c).body, `id="repaired-by">replaced by promoted replay <a href="/ui/runs/run-fix">`)
	require.Contains(t, f.get("/ui/runs?session=s1", c).body, `run-fix</a> <span class="tag">promoted replay</span>`)
}

// TestOverviewSavedCountsTheSessionsState: the overview's tokens saved
// count the runs that are their session's state: the what-if replay
// saves nothing, the promoted one counts in place of the run it
// repaired; only the what-if is a replay there.
func TestOverviewSavedCountsTheSessionsState(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now().UTC()
	promotedSession(t, f, time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC))
	c := f.signIn(f.keyA)
	a := f.get("/ui/overview?days=7", c)
	require.Equal(t, http.StatusOK, a.status, a.body)
	// run-1 saved 7,000 and run-fix 8,000; not run-orig's 1,000 nor
	// run-whatif's 5,000.
	require.Contains(t, a.body, `id="total-saved">15,000<`)
	require.Contains(t, a.body, `<span class="k">replays</span><span class="v">1<`)
	// The promoted replay is counted as one; every committed run of the
	// fixture went through a fallback; the net saving is the session's
	// state's (run-1 and run-fix, $0.0123 each), the summarizer's cost
	// every run's ($0.0007 each).
	require.Contains(t, a.body, `id="total-promoted">1<`)
	require.Contains(t, a.body, `id="total-degraded">4<`)
	require.Contains(t, a.body, `id="total-net-saving">$0.0246<`)
	require.Contains(t, a.body, `id="total-summarizer">$0.0028<`)

	// The session page adds up the same way.
	page := f.get("/ui/sessions/s1", c)
	require.Equal(t, http.StatusOK, page.status, page.body)
	require.Contains(t, page.body, `id="totals-runs">2<`, "run-1 and run-fix are the session's state")
	require.Contains(t, page.body, `id="totals-degraded">4<`)
	require.Contains(t, page.body, `id="totals-net-saving">$0.0246<`)
	require.Contains(t, page.body, `id="totals-summarizer">$0.0028<`, "paid by every run, replays included")
}

// TestStepTableShowsUnits: every size in the step table carries its
// unit: bytes, the run's unit, or a count.
func TestStepTableShowsUnits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	started := time.Now().UTC().Add(-time.Hour)
	f.addRun(tenantA, "s1", "run-ok", store.RunSucceeded, "adaptive", started, 8000, 2000)
	for i, s := range []store.Step{
		{Name: "deterministic", Kind: "deterministic", InputSize: 41234, OutputSize: 2000},
		{Name: "map-reduce/chunk", Kind: "chunk", InputSize: 5000, OutputSize: 3},
		{Name: "commit", Kind: "commit", OutputSize: 9000},
	} {
		s.RunID, s.Attempt, s.Execution = "run-ok", 1, fmt.Sprint("u", i)
		s.At = started.Add(time.Duration(i+3) * time.Second)
		require.NoError(t, f.store.RecordStep(t.Context(), s))
	}
	c := f.signIn(f.keyA)
	page := f.get("/ui/runs/run-ok", c)
	require.Equal(t, http.StatusOK, page.status)
	_, steps, ok := strings.Cut(page.body, `id="steps"`)
	require.True(t, ok)
	steps, _, _ = strings.Cut(steps, "</table>")
	for _, want := range []string{
		`<td class="n">41,234 B</td><td class="n">2,000 tokens</td>`,
		`<td class="n">5,000 B</td><td class="n">3 chunks</td>`,
		`<td class="n">–</td><td class="n">9,000 B</td>`,
		`<th class="n">prompt tokens</th>`,
	} {
		require.Contains(t, steps, want)
	}
	require.Contains(t, page.body, `id="step-units"`)
}

// TestStepUnitsCoverEveryStepKind: every kind of step an activity
// records (activities' a.begin calls) has its units in stepUnits, so that
// a new step does not show bare numbers again.
func TestStepUnitsCoverEveryStepKind(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "..", "activities", "*.go"))
	require.NoError(t, err)
	begin := regexp.MustCompile(`a\.begin\(ctx, [^\n]*, "([a-z-]+)"\)`)
	kinds := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		for _, m := range begin.FindAllStringSubmatch(string(src), -1) {
			kinds[m[1]] = true
		}
	}
	require.NotEmpty(t, kinds)
	var missing []string
	for k := range kinds {
		if _, ok := stepUnits[k]; !ok {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "step kinds without units in stepUnits")
}
