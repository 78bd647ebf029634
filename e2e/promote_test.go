package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// apiPromotion is the answer of POST /v1/runs/{run}/promote.
type apiPromotion struct {
	RunID      string `json:"run_id"`
	ReplayOf   string `json:"replay_of"`
	Session    string `json:"session"`
	PromotedBy string `json:"promoted_by"`
	Existing   bool   `json:"existing"`
}

// TestPromoteRepairedReplay is the operator's path through the API: a run
// ends over its limit while the summarizer is down (offload-compact leaves
// the history unchanged then); its replay, once the
// summarizer is back, succeeds; promoting the replay makes it the
// session's state (status names it, a run.promoted webhook tells the
// platform), once, and only for its tenant. Along the way the session's
// watermark history, its released offloads and the export with step rows
// are readable, and bad parameters are 400s naming them.
func TestPromoteRepairedReplay(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t)
	r := startReceiver(t, "")
	a.registerWebhook(r)
	input := readData(t, "swe-agent-deepseek/django__django-12308.json")

	a.llm.SetDown(true)
	var orig struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
	}
	resp, body := a.call("POST", "/v1/sessions/s1/events", a.key, eventBody(map[string]any{"event_id": "ev-outage",
		"preset": "offload-compact", "model": "gpt-4o", "context_limit": 25000, "wait_seconds": 120}, input), &orig)
	require.Equal(t, http.StatusOK, resp.StatusCode, clip(string(body), 400))
	require.Equal(t, "over_limit", orig.Status, "the summarizer is down, the history stays: %s", clip(string(body), 400))

	var sub struct {
		RunID     string `json:"run_id"`
		StatusURL string `json:"status_url"`
	}
	a.llm.SetDown(false)
	resp, body = a.call("POST", "/v1/runs/"+orig.RunID+"/replay", a.key, []byte(`{"request_id":"after-outage"}`), &sub)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	replay := a.pollRun(sub.StatusURL)
	require.Equal(t, "succeeded", replay.Run.Status, replay.Run.Error)

	var status struct {
		LastRunID  string         `json:"last_run_id"`
		Promotions []apiPromotion `json:"promotions"`
	}
	resp, _ = a.call("GET", "/v1/sessions/s1/status", a.key, nil, &status)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEqual(t, sub.RunID, status.LastRunID, "an unpromoted replay is a what-if")
	require.Empty(t, status.Promotions)

	var e apiError
	resp, _ = a.call("POST", "/v1/runs/"+sub.RunID+"/promote", a.otherKey, nil, &e)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "another tenant's replay")
	resp, body = a.call("POST", "/v1/runs/"+orig.RunID+"/promote", a.key, nil, &e)
	require.Equal(t, http.StatusConflict, resp.StatusCode, string(body))
	require.Equal(t, "run", e.Error.Field, "the original is not a replay")

	var p apiPromotion
	resp, body = a.call("POST", "/v1/runs/"+sub.RunID+"/promote", a.key, nil, &p)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, apiPromotion{RunID: sub.RunID, ReplayOf: orig.RunID, Session: "s1", PromotedBy: p.PromotedBy}, p)
	require.NotEmpty(t, p.PromotedBy)
	resp, _ = a.call("POST", "/v1/runs/"+sub.RunID+"/promote", a.key, nil, &p)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, p.Existing, "promoting again answers the same promotion")

	resp, _ = a.call("GET", "/v1/sessions/s1/status", a.key, nil, &status)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, sub.RunID, status.LastRunID, "the promoted replay is what the agent continues from")
	require.Len(t, status.Promotions, 1)
	// Status, export, UI and webhooks agree: the promoted replay is the
	// session's run, not an audit-only replay, in place of its original.
	var counts struct {
		Replays         int `json:"replays"`
		PromotedReplays int `json:"promoted_replays"`
		History         []struct {
			RunID      string `json:"run_id"`
			Replay     bool   `json:"replay"`
			Promoted   bool   `json:"promoted"`
			Superseded bool   `json:"superseded"`
		} `json:"history"`
	}
	resp, _ = a.call("GET", "/v1/sessions/s1/status", a.key, nil, &counts)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Zero(t, counts.Replays, "the only replay is promoted: none is audit only")
	require.Equal(t, 1, counts.PromotedReplays)
	for _, h := range counts.History {
		require.False(t, h.Replay, "no what-if pass")
		require.Equal(t, h.RunID == sub.RunID, h.Promoted, "%+v", h)
		require.Equal(t, h.RunID == orig.RunID, h.Superseded, "%+v", h)
	}
	ui := a.uiSignIn()
	page := a.uiGet(ui, "/ui/sessions/s1")
	require.Contains(t, page, `<a href="/ui/runs/`+sub.RunID+`" class="run-link">`+sub.RunID+`</a> <span class="tag">promoted replay</span>`)
	require.Contains(t, page, `id="timeline-promoted"`)
	require.NotContains(t, page, `id="timeline-replays"`, "no what-if on the timeline")
	require.Contains(t, a.uiGet(ui, "/ui/sessions/s1/timeline.svg"), "#2 promoted")

	ds := a.deliveriesWhen(sub.RunID, func(ds []apiDelivery) bool {
		return slices.ContainsFunc(ds, func(d apiDelivery) bool { return d.EventType == "run.promoted" && d.Status == "delivered" })
	})
	require.Len(t, slices.DeleteFunc(ds, func(d apiDelivery) bool { return d.EventType != "run.promoted" }), 1, "told once")
	var seen []receivedLine
	require.Eventually(t, func() bool {
		seen = r.seen()
		return slices.ContainsFunc(seen, func(l receivedLine) bool { return l.Type == "run.promoted" })
	}, 2*time.Minute, 100*time.Millisecond)
	require.True(t, slices.ContainsFunc(seen, func(l receivedLine) bool {
		return l.Type == "run.promoted" && l.RunID == sub.RunID && l.Verified
	}), "the receiver verified a run.promoted event: %+v", seen)
	final := slices.IndexFunc(seen, func(l receivedLine) bool { return l.Type == "run.succeeded" && l.RunID == sub.RunID })
	promoted := slices.IndexFunc(seen, func(l receivedLine) bool { return l.Type == "run.promoted" && l.RunID == sub.RunID })
	require.GreaterOrEqual(t, final, 0, "the replay's final event reached the receiver: %+v", seen)
	require.Less(t, final, promoted, "run.promoted after the run's own run.succeeded: %+v", seen)

	var marks struct {
		Current    string           `json:"current"`
		Watermarks []map[string]any `json:"watermarks"`
	}
	resp, body = a.call("GET", "/v1/sessions/s1/watermarks", a.key, nil, &marks)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.NotNil(t, marks.Watermarks)
	resp, _ = a.call("GET", "/v1/sessions/s1/watermarks", a.otherKey, nil, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "another tenant's session")

	resp, _ = a.call("GET", "/v1/sessions/s1/offloads?deleted=true", a.key, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, body = a.call("GET", "/v1/sessions/s1/offloads?deleted=maybe", a.key, nil, &e)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(body))
	require.Equal(t, "deleted", e.Error.Field)

	resp, body = a.call("GET", "/v1/export?steps=true", a.key, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	runs, steps := 0, 0
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Record       string `json:"record"`
			ID           string `json:"id"`
			RunID        string `json:"run_id"`
			Name         string `json:"name"`
			SessionState bool   `json:"session_state"`
			Promoted     bool   `json:"promoted"`
			RepairedBy   string `json:"repaired_by"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		switch line.Record {
		case "":
			runs++
			switch line.ID {
			case sub.RunID:
				require.True(t, line.SessionState && line.Promoted, "the promoted replay is the session's state")
			case orig.RunID:
				require.False(t, line.SessionState, "the run it repaired no longer is")
				require.Equal(t, sub.RunID, line.RepairedBy)
			}
		case "step":
			steps++
			require.NotEmpty(t, line.Name)
			require.Contains(t, []string{orig.RunID, sub.RunID}, line.RunID)
		default:
			t.Fatalf("unknown record %q", line.Record)
		}
	}
	require.Equal(t, 2, runs)
	require.Positive(t, steps, "step lines follow their runs")
	resp, body = a.call("GET", "/v1/export?steps=true&format=csv", a.key, nil, &e)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(body))
	require.Equal(t, "steps", e.Error.Field)
}

// uiSignIn signs in to the web UI with the tenant's key and returns its
// cookie.
func (a *apiEnv) uiSignIn() *http.Cookie {
	a.t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(a.url+"/ui/login", url.Values{"key": {a.key}})
	require.NoError(a.t, err)
	defer resp.Body.Close()
	require.Equal(a.t, http.StatusSeeOther, resp.StatusCode)
	for _, c := range resp.Cookies() {
		if c.Value != "" {
			return c
		}
	}
	a.t.Fatal("the UI set no cookie")
	return nil
}

// uiGet reads a page of the web UI with cookie.
func (a *apiEnv) uiGet(cookie *http.Cookie, path string) string {
	a.t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.url+path, nil)
	require.NoError(a.t, err)
	req.AddCookie(cookie)
	resp, err := a.client.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	require.Equal(a.t, http.StatusOK, resp.StatusCode, "%s: %s", path, clip(string(body), 400))
	return string(body)
}

// clip keeps failure messages readable: an answer can hold a whole
// conversation.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
