package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
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
	a := newAPIEnv(t, offline())
	input := readData(t, "django__django-11742.json")

	// Real runs: two in one session at two limits, one in another session
	// under another preset, and one of another tenant.
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
	require.Equal(t, []string{beta.RunID, alpha[1].id, alpha[0].id}, listedRuns(table))
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
	require.Len(t, listedRuns(table), 3)
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
	shot(t, ctx, "run.png", "")

	// Another tenant's run is not found.
	step(t, ctx, "another tenant's run", chromedp.Navigate(a.url+"/ui/runs/"+other.RunID), chromedp.WaitVisible(chromedp.CSS("#message")))
	require.Equal(t, "run or session not found", value(t, ctx, "message", chromedp.Text(chromedp.CSS("#message"))))

	// The session page and its token timeline with every run's points.
	step(t, ctx, "open the session", chromedp.Navigate(a.url+"/ui/sessions/ui-alpha"), chromedp.WaitVisible(chromedp.CSS("#status")))
	require.True(t, imageLoaded(t, ctx, "#timeline"), "the timeline loads")
	table = value(t, ctx, "session runs", chromedp.OuterHTML(chromedp.CSS("#runs")))
	require.Equal(t, []string{alpha[1].id, alpha[0].id}, listedRuns(table))
	shot(t, ctx, "session.png", "session.png")
	step(t, ctx, "open the timeline", chromedp.Navigate(a.url+"/ui/sessions/ui-alpha/timeline.svg"), chromedp.WaitReady(chromedp.CSS("svg")))
	svg := value(t, ctx, "timeline svg", chromedp.OuterHTML(chromedp.CSS("svg")))
	for i, r := range alpha {
		require.Contains(t, svg, ">"+thousands(r.res.TokensBefore)+"<", "run %d before", i+1)
		require.Contains(t, svg, ">"+thousands(r.res.TokensAfter)+" "+r.res.LevelAfter+"<", "run %d after", i+1)
		require.Contains(t, svg, fmt.Sprintf(">#%d<", i+1))
	}
	require.Contains(t, svg, ">CRITICAL<")
	// The other tenant's session of the same name adds no point.
	require.NotContains(t, svg, ">#3<")

	// The overview counts this tenant's runs only.
	step(t, ctx, "open the overview", chromedp.Navigate(a.url+"/ui/overview?days=7"), chromedp.WaitVisible(chromedp.CSS("#totals")))
	require.Equal(t, "3", value(t, ctx, "total runs", chromedp.Text(chromedp.CSS("#total-runs"))))
	require.Equal(t, "3", value(t, ctx, "succeeded", chromedp.Text(chromedp.CSS("#total-succeeded"))))
	require.True(t, imageLoaded(t, ctx, "#runs-chart"), "the runs chart loads")
	require.True(t, imageLoaded(t, ctx, "#tokens-chart"), "the tokens chart loads")
	shot(t, ctx, "overview.png", "")

	// Sign out: the next page asks for the key again.
	submit(t, ctx, "sign out", "#key", chromedp.Click(chromedp.CSS("#signout")))
	step(t, ctx, "signed out", chromedp.Navigate(a.url+"/ui/runs"), chromedp.WaitVisible(chromedp.CSS("#key")))
	loc := value(t, ctx, "location", chromedp.Location())
	require.True(t, strings.HasPrefix(loc, a.url+"/ui/login?next="), loc)
	u, err := url.Parse(loc)
	require.NoError(t, err)
	require.Equal(t, "/ui/runs", u.Query().Get("next"))
}
