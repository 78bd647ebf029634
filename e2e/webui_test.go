package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/gateway"
)

// screenshotSize is the browser's viewport: the README's screenshots stay
// small at this size.
const screenshotWidth, screenshotHeight = 1100, 700

// chromiumPath finds the browser. A machine without one fails the test:
// .ci/run installs Debian's chromium.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	t.Fatal("no Chromium found on PATH (chromium, chromium-browser, google-chrome): " +
		"install Debian's package with `apt-get install -y chromium` (.ci/run does it)")
	return ""
}

// newBrowser starts a headless Chromium with a fresh profile; it stops
// with the test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	profile := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(screenshotWidth, screenshotHeight),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	// Registered after TempDir: the browser stops before its profile is
	// removed.
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(screenshotWidth, screenshotHeight)); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// step runs browser actions with a bound on their time, failing the test
// with what was being done.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, chromedp.Do(sctx, actions...), what)
}

// submit marks the current page, runs actions that submit one of its
// forms, and waits for selector on the page that replaces it (the old
// page's elements do not count).
func submit(t *testing.T, ctx context.Context, what, selector string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	all := []chromedp.Action[chromedp.Void]{chromedp.Evaluate[chromedp.Void](`document.body.setAttribute("data-stale", "1")`)}
	all = append(all, actions...)
	all = append(all, chromedp.WaitVisible(chromedp.CSS("body:not([data-stale]) "+selector)))
	step(t, ctx, what, all...)
}

// value runs one browser action that returns a value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(sctx, a)
	require.NoError(t, err, what)
	return v
}

// shot saves a screenshot of the viewport as a test artifact (kept with
// `go test -artifacts -outputdir DIR`) and, with UPDATE_SCREENSHOTS=1 and
// docName set, as the README's screenshot docs/screenshots/docName.
func shot(t *testing.T, ctx context.Context, name, docName string) {
	t.Helper()
	png := value(t, ctx, "screenshot "+name, chromedp.CaptureScreenshot())
	require.NoError(t, os.WriteFile(filepath.Join(t.ArtifactDir(), name), png, 0o644))
	if docName != "" && os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		dir := filepath.Join("..", "docs", "screenshots")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, docName), png, 0o644))
	}
}

// listedRuns returns the run ids of a runs table's rows, in order.
func listedRuns(html string) []string {
	var ids []string
	for _, part := range strings.Split(html, `data-run="`)[1:] {
		id, _, _ := strings.Cut(part, `"`)
		ids = append(ids, id)
	}
	return ids
}

// imageLoaded reports whether the <img> of selector has been decoded.
func imageLoaded(t *testing.T, ctx context.Context, selector string) bool {
	t.Helper()
	step(t, ctx, "wait for "+selector, chromedp.WaitVisible(chromedp.CSS(selector)))
	w := value(t, ctx, "read "+selector, chromedp.Evaluate[int](fmt.Sprintf(
		`(() => { const i = document.querySelector(%q); return i && i.complete ? i.naturalWidth : 0; })()`, selector)))
	return w > 0
}

// box is an element's bounding box in CSS pixels.
type box struct {
	X, Y, W, H float64
}

// overlaps reports whether two boxes share more than a hairline: text
// boxes that merely touch (rounding) do not count.
func (a box) overlaps(b box) bool {
	const eps = 0.5
	return a.X+eps < b.X+b.W && b.X+eps < a.X+a.W && a.Y+eps < b.Y+b.H && b.Y+eps < a.Y+a.H
}

// inside reports whether a lies within b, to a pixel.
func (a box) inside(b box) bool {
	return a.X >= b.X-1 && a.Y >= b.Y-1 && a.X+a.W <= b.X+b.W+1 && a.Y+a.H <= b.Y+b.H+1
}

// chartText is one <text> of a chart as the browser drew it.
type chartText struct {
	Text string
	Font string
	Box  box
}

// chartLayout is a chart as the browser drew it: its texts and the
// areas renderSVG marks (the data area and the legend column).
type chartLayout struct {
	Texts  []chartText
	Plot   *box
	Legend *box
}

// chartLayoutJS reads a chart opened as a document.
const chartLayoutJS = `(() => {
	const box = e => { const r = e.getBoundingClientRect(); return {X: r.x, Y: r.y, W: r.width, H: r.height}; };
	const area = id => { const e = document.getElementById(id); return e ? box(e) : null; };
	const texts = [...document.querySelectorAll("text")].map(e => ({Text: e.textContent.trim(), Font: getComputedStyle(e).fontFamily, Box: box(e)}));
	return {Texts: texts, Plot: area("plot-area"), Legend: area("legend-area")};
})()`

// checkChart opens the chart at path as a document and checks it as the
// browser drew it: every text in a sans-serif font, no two texts
// overlapping, the legend's entries in the legend column and that column
// clear of the data area.
func checkChart(t *testing.T, ctx context.Context, base, path string, legend []string) {
	t.Helper()
	step(t, ctx, "open "+path, chromedp.Navigate(base+path), chromedp.WaitReady(chromedp.CSS("svg")))
	c := value(t, ctx, "layout of "+path, chromedp.Evaluate[chartLayout](chartLayoutJS))
	require.NotEmpty(t, c.Texts, path)
	require.NotNil(t, c.Plot, "%s marks its data area", path)
	for _, tx := range c.Texts {
		require.True(t, strings.HasSuffix(tx.Font, "sans-serif"), "%s: %q is in %s", path, tx.Text, tx.Font)
		require.NotContains(t, strings.TrimSuffix(tx.Font, "sans-serif"), "serif", "%s: %q", path, tx.Text)
	}
	for i, a := range c.Texts {
		if a.Box.W == 0 {
			continue // an empty tick label
		}
		for _, b := range c.Texts[i+1:] {
			if b.Box.W == 0 {
				continue
			}
			require.False(t, a.Box.overlaps(b.Box), "%s: %q %+v and %q %+v overlap", path, a.Text, a.Box, b.Text, b.Box)
		}
	}
	if len(legend) == 0 {
		return
	}
	require.NotNil(t, c.Legend, "%s marks its legend", path)
	require.False(t, c.Legend.overlaps(*c.Plot), "%s: the legend %+v is over the data %+v", path, *c.Legend, *c.Plot)
	for _, name := range legend {
		i := slices.IndexFunc(c.Texts, func(tx chartText) bool { return tx.Text == name })
		require.GreaterOrEqual(t, i, 0, "%s: legend entry %q", path, name)
		tx := c.Texts[i]
		require.True(t, tx.Box.inside(*c.Legend), "%s: legend entry %q %+v is in the legend column %+v", path, name, tx.Box, *c.Legend)
		require.False(t, tx.Box.overlaps(*c.Plot), "%s: legend entry %q is over the data", path, name)
	}
}

// chartWidth is the share of its container's content width that the
// <img> of selector takes on the page.
func chartWidth(t *testing.T, ctx context.Context, selector string) float64 {
	t.Helper()
	return value(t, ctx, "width of "+selector, chromedp.Evaluate[float64](fmt.Sprintf(`(() => {
		const img = document.querySelector(%q), parent = img.parentElement, st = getComputedStyle(parent);
		const inner = parent.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight);
		return img.getBoundingClientRect().width / inner;
	})()`, selector)))
}

// thousands formats n as the UI does: 31262 → "31,262".
func thousands(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func TestWebUI(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	a := newAPIEnv(t, withoutLLM())
	input := readData(t, "django__django-11742.json")

	// Real runs: two in one session at two limits, one in another session
	// under another preset, one of another tenant, and (below) a replay.
	type done struct {
		id  string
		res contract.Outcome
	}
	var alpha []done
	for i, limit := range []int{40000, 60000} {
		sub, res := a.compact(gateway.Event{Session: "ui-alpha", EventID: fmt.Sprintf("ui-alpha-%d", i), Model: "gpt-4o",
			ContextLimit: limit, Conversation: input})
		alpha = append(alpha, done{sub.RunID, res})
	}
	beta, _ := a.compact(gateway.Event{Session: "ui-beta", EventID: "ui-beta-0", Preset: "three-tier", Model: "gpt-4o",
		ContextLimit: 40000, Conversation: input})
	other, _ := a.compact(gateway.Event{Tenant: a.otherTenant, Session: "ui-alpha", EventID: "ui-other-0", Model: "gpt-4o",
		ContextLimit: 40000, Conversation: input})
	for _, r := range alpha {
		require.True(t, r.res.TokensAfter < r.res.TokensBefore, "run %s compacted", r.id)
	}
	// A what-if replay of the first run, under the watermark preset (no
	// LLM): the session's timeline shows it, marked.
	rep, err := a.gw.Replay(t.Context(), a.tenant, alpha[0].id, gateway.ReplayRequest{RequestID: "ui-replay", Preset: "watermark"})
	require.NoError(t, err)
	repRes, err := a.gw.Wait(t.Context(), rep.RunID)
	require.NoError(t, err)
	require.Equal(t, "succeeded", repRes.Status)

	// Sign in: the runs page sends the browser to the form and back.
	step(t, ctx, "open the runs page",
		chromedp.Navigate(a.url+"/ui/runs"),
		chromedp.WaitVisible(chromedp.CSS("#key")),
	)
	require.Contains(t, value(t, ctx, "location", chromedp.Location()), "/ui/login?next=")
	submit(t, ctx, "sign in", "#runs",
		chromedp.SendKeys(chromedp.CSS("#key"), a.key),
		chromedp.Click(chromedp.CSS("#signin")),
	)
	require.Equal(t, a.url+"/ui/runs", value(t, ctx, "location", chromedp.Location()))
	require.Equal(t, a.tenant, value(t, ctx, "tenant", chromedp.Text(chromedp.CSS("#tenant"))))

	// The list shows this tenant's runs, newest first, and not the other's.
	table := value(t, ctx, "runs table", chromedp.OuterHTML(chromedp.CSS("#runs")))
	require.Equal(t, []string{rep.RunID, beta.RunID, alpha[1].id, alpha[0].id}, listedRuns(table))
	require.NotContains(t, table, other.RunID)
	shot(t, ctx, "runs.png", "runs.png")

	// Filters through the form.
	submit(t, ctx, "filter by session", "#runs",
		chromedp.SetValue(chromedp.CSS("#f-session"), "ui-beta"),
		chromedp.Click(chromedp.CSS("#f-apply")),
	)
	require.Contains(t, value(t, ctx, "location", chromedp.Location()), "session=ui-beta")
	table = value(t, ctx, "filtered table", chromedp.OuterHTML(chromedp.CSS("#runs")))
	require.Equal(t, []string{beta.RunID}, listedRuns(table))
	submit(t, ctx, "filter by preset and status", "#runs",
		chromedp.Clear(chromedp.CSS("#f-session")),
		chromedp.SetValue(chromedp.CSS("#f-preset"), "adaptive"),
		chromedp.SetValue(chromedp.CSS("#f-status"), "succeeded"),
		chromedp.Click(chromedp.CSS("#f-apply")),
	)
	require.Contains(t, value(t, ctx, "location", chromedp.Location()), "preset=adaptive")
	table = value(t, ctx, "filtered table", chromedp.OuterHTML(chromedp.CSS("#runs")))
	require.Equal(t, []string{alpha[1].id, alpha[0].id}, listedRuns(table))
	submit(t, ctx, "filter by status failed", "#no-runs",
		chromedp.SetValue(chromedp.CSS("#f-status"), "failed"),
		chromedp.Click(chromedp.CSS("#f-apply")),
	)
	today := time.Now().UTC().Format(time.DateOnly)
	step(t, ctx, "filter by dates",
		chromedp.Navigate(a.url+"/ui/runs?from="+today+"&to="+today),
		chromedp.WaitVisible(chromedp.CSS("#runs")),
	)
	table = value(t, ctx, "dated table", chromedp.OuterHTML(chromedp.CSS("#runs")))
	require.Len(t, listedRuns(table), 4)
	step(t, ctx, "a bad filter", chromedp.Navigate(a.url+"/ui/runs?status=bogus"), chromedp.WaitVisible(chromedp.CSS("#field")))
	require.Equal(t, "status", value(t, ctx, "field", chromedp.Text(chromedp.CSS("#field"))))

	// A run's page with its figures and its step chart.
	first := alpha[0]
	step(t, ctx, "open a run", chromedp.Navigate(a.url+"/ui/runs/"+first.id), chromedp.WaitVisible(chromedp.CSS("#figures")))
	require.Equal(t, thousands(first.res.TokensBefore), value(t, ctx, "tokens before", chromedp.Text(chromedp.CSS("#tokens-before"))))
	require.Equal(t, thousands(first.res.TokensAfter), value(t, ctx, "tokens after", chromedp.Text(chromedp.CSS("#tokens-after"))))
	require.Equal(t, "succeeded", value(t, ctx, "status", chromedp.Text(chromedp.CSS("#status"))))
	require.True(t, imageLoaded(t, ctx, "#steps-chart"), "the step chart loads")
	steps := value(t, ctx, "steps table", chromedp.OuterHTML(chromedp.CSS("#steps")))
	require.Contains(t, steps, "commit")
	step(t, ctx, "the diff", chromedp.WaitVisible(chromedp.CSS("#diff-summary")))
	// Runs of summarized (or removed) messages are one row each, folded.
	actions := value(t, ctx, "diff rows", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("#diff > tbody > tr")].map(r => r.className)`))
	for i := 1; i < len(actions); i++ {
		for _, folded := range []string{"act-summarized", "act-removed"} {
			require.False(t, actions[i-1] == folded && actions[i] == folded, "rows %d and %d are both %s, not folded", i-1, i, folded)
		}
	}
	// A drift verdict is never squeezed to a word per line.
	verdicts := value(t, ctx, "drift verdict widths", chromedp.Evaluate[[]float64](
		`[...document.querySelectorAll("#drift td.verdict")].map(td => td.getBoundingClientRect().width)`))
	for _, w := range verdicts {
		require.GreaterOrEqual(t, w, 200.0, "verdict column width")
	}
	require.GreaterOrEqual(t, chartWidth(t, ctx, "#steps-chart"), 0.95, "the step chart takes the page's width")
	shot(t, ctx, "run.png", "")
	checkChart(t, ctx, a.url, "/ui/runs/"+first.id+"/steps.svg", []string{"attempt", "failed attempt"})

	// Another tenant's run is not found.
	step(t, ctx, "another tenant's run", chromedp.Navigate(a.url+"/ui/runs/"+other.RunID), chromedp.WaitVisible(chromedp.CSS("#message")))
	require.Equal(t, "run or session not found", value(t, ctx, "message", chromedp.Text(chromedp.CSS("#message"))))

	// The session page and its token timeline with every run's points.
	step(t, ctx, "open the session", chromedp.Navigate(a.url+"/ui/sessions/ui-alpha"), chromedp.WaitVisible(chromedp.CSS("#status")))
	require.True(t, imageLoaded(t, ctx, "#timeline"), "the timeline loads")
	require.GreaterOrEqual(t, chartWidth(t, ctx, "#timeline"), 0.95, "the timeline takes the page's width")
	table = value(t, ctx, "session runs", chromedp.OuterHTML(chromedp.CSS("#runs")))
	require.Equal(t, []string{rep.RunID, alpha[1].id, alpha[0].id}, listedRuns(table))
	require.Contains(t, value(t, ctx, "replays note", chromedp.Text(chromedp.CSS("#timeline-replays"))), "1 replay is on the plot")
	shot(t, ctx, "session.png", "session.png")
	checkChart(t, ctx, a.url, "/ui/sessions/ui-alpha/timeline.svg", []string{"before", "after", "replay (what-if)", "limit (100%)", "GREEN", "CRITICAL"})
	step(t, ctx, "open the timeline", chromedp.Navigate(a.url+"/ui/sessions/ui-alpha/timeline.svg"), chromedp.WaitReady(chromedp.CSS("svg")))
	svg := value(t, ctx, "timeline svg", chromedp.OuterHTML(chromedp.CSS("svg")))
	for i, r := range alpha {
		require.Contains(t, svg, ">"+thousands(r.res.TokensBefore)+"<", "run %d before", i+1)
		require.Contains(t, svg, ">"+thousands(r.res.TokensAfter)+" "+r.res.LevelAfter+"<", "run %d after", i+1)
		require.Contains(t, svg, fmt.Sprintf(">#%d<", i+1))
	}
	require.Contains(t, svg, ">#3 replay<", "the replay is the third run, marked")
	// (in one label with its size before when the two are close)
	require.Contains(t, svg, thousands(repRes.TokensAfter)+" "+repRes.LevelAfter+"<", "the replay's point")
	require.Contains(t, svg, ">CRITICAL<")
	// The other tenant's session of the same name adds no point.
	require.NotContains(t, svg, ">#4")

	// The overview counts this tenant's runs only.
	step(t, ctx, "open the overview", chromedp.Navigate(a.url+"/ui/overview?days=7"), chromedp.WaitVisible(chromedp.CSS("#totals")))
	require.Equal(t, "4", value(t, ctx, "total runs", chromedp.Text(chromedp.CSS("#total-runs"))))
	require.Equal(t, "4", value(t, ctx, "succeeded", chromedp.Text(chromedp.CSS("#total-succeeded"))))
	require.True(t, imageLoaded(t, ctx, "#runs-chart"), "the runs chart loads")
	require.True(t, imageLoaded(t, ctx, "#tokens-chart"), "the tokens chart loads")
	for _, chart := range []string{"#runs-chart", "#tokens-chart"} {
		require.GreaterOrEqual(t, chartWidth(t, ctx, chart), 0.95, "%s takes the page's width", chart)
	}
	shot(t, ctx, "overview.png", "")
	checkChart(t, ctx, a.url, "/ui/overview/runs.svg?days=7", []string{"succeeded", "over_limit", "failed", "live"})
	checkChart(t, ctx, a.url, "/ui/overview/tokens.svg?days=7", nil)
	step(t, ctx, "back to the overview", chromedp.Navigate(a.url+"/ui/overview?days=7"), chromedp.WaitVisible(chromedp.CSS("#totals")))

	// Sign out: the next page asks for the key again.
	submit(t, ctx, "sign out", "#key", chromedp.Click(chromedp.CSS("#signout")))
	step(t, ctx, "signed out", chromedp.Navigate(a.url+"/ui/runs"), chromedp.WaitVisible(chromedp.CSS("#key")))
	loc := value(t, ctx, "location", chromedp.Location())
	require.True(t, strings.HasPrefix(loc, a.url+"/ui/login?next="), loc)
	u, err := url.Parse(loc)
	require.NoError(t, err)
	require.Equal(t, "/ui/runs", u.Query().Get("next"))
}
