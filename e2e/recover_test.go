package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/recoverid"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
)

// recoverIDs finds the ids a compacted conversation names for the
// recover_context tool: offload ids and archive ids.
var recoverIDs = regexp.MustCompile(`id: ([0-9a-f]{64}(?:\.m[0-9]+(?:-[0-9]+|b[0-9]+))?)`)

// TestRecoverEveryCut is issue 19's point 6: on a real conversation,
// every cut (a history summary, a post-processed or truncated result, a
// truncated input, an offload) names an id, every id the output names
// reads back over HTTP, and together they give back every text of the
// original the output no longer holds: nothing cut is unreachable.
// Another tenant and another session get 404 for each id; a line range
// past the end is a 416 with the line count; search hits carry ids that
// read them back.
func TestRecoverEveryCut(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM())
	base := readData(t, "swe-agent-deepseek/django__django-12308.json")
	// A fresh result too large for the goal that nothing may offload:
	// the budget ladder has to cut it.
	withBig, err := convtest.AppendResults(base, convtest.MultiLine(90_000))
	require.NoError(t, err)
	// The ReAct two-layer design: a huge result of a ReAct trajectory is map-reduced.
	react, err := os.ReadFile("../internal/conversation/testdata/react_sample.json")
	require.NoError(t, err)
	react, err = convtest.AppendResults(react, hugeText(t)[:300_000])
	require.NoError(t, err)
	for _, tc := range []struct {
		name, preset, overrides string
		input                   []byte
		limit                   int
		passes                  []string
		query                   string
	}{
		{"auto-summarize", policy.AutoSummarize, "", base, 50000, []string{"history"}, "django/db/models"},
		{"three-tier-budget-truncate", policy.ThreeTier, `{"offload":{"min_tokens":1000000},"budget":{"offload_min_tokens":1000000}}`,
			withBig, 20000, []string{"truncate-inputs", "history", "budget/truncate"}, "django/db/models"},
		{"react-two-layer", policy.ReactTwoLayer, "", react, 0, []string{"map-reduce"}, "requests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			session := "recover-" + tc.name
			fields := map[string]any{"event_id": "ev-" + tc.name, "kind": "manual", "preset": tc.preset, "model": "gpt-4o",
				"wait_seconds": 120}
			if tc.limit > 0 {
				fields["context_limit"] = tc.limit
			}
			if tc.overrides != "" {
				fields["overrides"] = json.RawMessage(tc.overrides)
			}
			var res apiResult
			resp, body := a.call("POST", "/v1/sessions/"+session+"/events", a.key, eventBody(fields, tc.input), &res)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
			require.Equal(t, "succeeded", res.Status, "%s %s", res.Error, res.OverLimitReason)
			applied := map[string]bool{}
			for _, p := range res.Passes {
				pm := p.(map[string]any)
				if pm["applied"] == true {
					applied[pm["name"].(string)] = true
				}
			}
			for _, p := range tc.passes {
				require.True(t, applied[p], "pass %s applied: %v", p, res.Passes)
			}
			run, err := a.store.GetRun(t.Context(), res.RunID)
			require.NoError(t, err)

			// Every id the output names reads back.
			ids := map[string]bool{}
			for _, m := range recoverIDs.FindAllStringSubmatch(string(res.Conversation), -1) {
				ids[m[1]] = true
			}
			require.NotEmpty(t, ids)
			var recovered strings.Builder
			archiveIDs := 0
			for id := range ids {
				resp, body := a.call("GET", "/v1/sessions/"+session+"/offloads/"+id, a.key, nil, nil)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", id, body)
				require.Equal(t, strconv.Itoa(apiLines(string(body))), resp.Header.Get("X-Total-Lines"))
				recovered.Write(body)
				recovered.WriteByte('\n')
				if rid, err := recoverid.Parse(id); err == nil {
					archiveIDs++
					require.Equal(t, run.ArchiveSHA256, rid.Archive, "ids point into this run's archive")
					// The system prompt is never cut: a range from 0 would
					// be the fallback of a failed alignment.
					require.Positive(t, rid.From, "%s", id)
					if !rid.IsBlock() {
						require.Contains(t, string(res.Conversation), recoverid.SummaryLine(rid), "the summary says which messages")
					}
				}

				// Never for another tenant, never for another session.
				resp, body = a.call("GET", "/v1/sessions/"+session+"/offloads/"+id, a.otherKey, nil, nil)
				require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)
				resp, body = a.call("GET", "/v1/sessions/other-"+session+"/offloads/"+id, a.key, nil, nil)
				require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)
			}
			require.Positive(t, archiveIDs, "the cuts name archive ids")

			// Nothing cut is unreachable: every text, input and result of
			// the original is in the output as it was, or in what its ids
			// give back.
			orig, out := parse(t, tc.input), parse(t, res.Conversation)
			var kept strings.Builder
			for _, m := range out.Messages {
				for _, b := range m.Blocks {
					kept.WriteString(b.Text + "\n" + b.Input + "\n")
				}
			}
			all, cut := kept.String(), 0
			for i, m := range orig.Messages {
				for j, b := range m.Blocks {
					for _, piece := range []string{b.Text, b.Input} {
						if strings.TrimSpace(piece) == "" || strings.Contains(all, piece) {
							continue
						}
						cut++
						require.True(t, strings.Contains(recovered.String(), piece),
							"message %d block %d (%s) was cut and no id gives it back", i, j, b.Kind)
					}
				}
			}
			require.Positive(t, cut, "the run cut something")
			t.Logf("%d ids (%d into the archive) give back the %d texts the output cut: %v", len(ids), archiveIDs, cut, ids)

			// A range past the end: 416 naming the count.
			for id := range ids {
				resp, body := a.call("GET", "/v1/sessions/"+session+"/offloads/"+id, a.key, nil, nil)
				total, err := strconv.Atoi(resp.Header.Get("X-Total-Lines"))
				require.NoError(t, err)
				past := fmt.Sprintf("%d-%d", total+1, total+50)
				resp, body = a.call("GET", "/v1/sessions/"+session+"/offloads/"+id+"?lines="+past, a.key, nil, nil)
				require.Equal(t, http.StatusRequestedRangeNotSatisfiable, resp.StatusCode, "%s", body)
				require.Equal(t, strconv.Itoa(total), resp.Header.Get("X-Total-Lines"))
				var e apiError
				require.NoError(t, json.Unmarshal(body, &e))
				require.Equal(t, "range_not_satisfiable", e.Error.Code)
				require.Contains(t, e.Error.Message, fmt.Sprintf("the text has %d lines", total))
				resp, body = a.call("GET", "/v1/sessions/"+session+"/offloads/"+id+"?lines="+strconv.Itoa(total), a.key, nil, nil)
				require.Equal(t, http.StatusOK, resp.StatusCode, "the last line is there")
				require.NotEmpty(t, body)
				break
			}

			// A search hit names the id that reads its message back.
			var hits struct {
				Hits []struct {
					Kind    string `json:"kind"`
					Message int    `json:"message"`
					ID      string `json:"id"`
				} `json:"hits"`
			}
			query := tc.query
			resp, body = a.call("GET", "/v1/sessions/"+session+"/search?q="+query, a.key, nil, &hits)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
			require.NotEmpty(t, hits.Hits)
			for _, h := range hits.Hits {
				require.NotEmpty(t, h.ID, "%+v", h)
				resp, body := a.call("GET", "/v1/sessions/"+session+"/offloads/"+h.ID, a.key, nil, nil)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
				require.Contains(t, string(body), query, "hit %+v reads back", h)
			}
		})
	}
}

// apiLines counts lines as the API does: a final line break ends the
// last line.
func apiLines(text string) int {
	if text == "" {
		return 0
	}
	n := strings.Count(text, "\n")
	if !strings.HasSuffix(text, "\n") {
		n++
	}
	return n
}
