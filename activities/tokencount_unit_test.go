package activities_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/tokens"
	"github.com/ctxcompact/orchestrator/internal/tokens/anthropic"
)

// countEndpoint is Anthropic's count_tokens answering inputTokens, or
// 529 overloaded_error when inputTokens is negative.
func countEndpoint(t *testing.T, inputTokens int, calls *atomic.Int32) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		var req struct {
			Model    string            `json:"model"`
			Messages []json.RawMessage `json:"messages"`
		}
		if r.Header.Get("x-api-key") != "sk-ant-unit" || r.Header.Get("anthropic-version") != "2023-06-01" ||
			json.Unmarshal(body, &req) != nil || req.Model == "" || len(req.Messages) == 0 {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad request"}}`)
			return
		}
		if inputTokens < 0 {
			w.WriteHeader(529)
			_, _ = io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]int{"input_tokens": inputTokens})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestUnitCommitCountsWithTheProvider: a Claude run's output is measured
// against its limit with Anthropic's count when the endpoint answers (the
// run that o200k × 1.25 puts over 4,000 tokens fits in the provider's
// 3,500), with the estimate when it fails or is not configured, and an
// OpenAI run with its own encoding; the outcome, as the workflow and every
// later reader get it, says which.
func TestUnitCommitCountsWithTheProvider(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name        string
		model       string
		configured  bool
		inputTokens int // the endpoint's answer; negative: 529
		counting    string
		status      string
		calls       int32
	}{
		{name: "claude, endpoint answers under the limit", model: "claude-sonnet-4-5", configured: true, inputTokens: 3500,
			counting: tokens.CountingProvider, status: "succeeded", calls: 1},
		{name: "claude, endpoint answers over the limit", model: "claude-sonnet-4-5", configured: true, inputTokens: 4500,
			counting: tokens.CountingProvider, status: "over_limit", calls: 1},
		{name: "claude, endpoint overloaded", model: "claude-sonnet-4-5", configured: true, inputTokens: -1,
			counting: tokens.CountingEstimate, status: "over_limit", calls: 2},
		{name: "claude, no key", model: "claude-sonnet-4-5",
			counting: tokens.CountingEstimate, status: "over_limit"},
		{name: "openai model, key set", model: "gpt-4o", configured: true, inputTokens: 3500,
			counting: tokens.CountingEncoding, status: "over_limit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := newUnit(t)
			u.run.Model = tt.model
			var calls atomic.Int32
			if tt.configured {
				c, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-unit", BaseURL: countEndpoint(t, tt.inputTokens, &calls)})
				require.NoError(t, err)
				u.a.ProviderTokens = c
			}
			in, plan := u.planned()
			res, err := u.a.Commit(t.Context(), activities.CommitInput{Run: u.run, WorkKey: in.Key, ArchiveKey: plan.Archive.Key,
				TokensBefore: plan.TokensBefore, Steps: []store.Step{*plan.StepRecord}})
			require.NoError(t, err, "an endpoint failure never fails the commit")
			require.True(t, res.Committed)
			require.Equal(t, tt.counting, res.Outcome.TokenCounting)
			require.Equal(t, tt.status, res.Outcome.Status)
			require.Equal(t, tt.calls, calls.Load())
			if tt.counting == tokens.CountingProvider {
				require.Equal(t, tt.inputTokens, res.Outcome.TokensAfter)
			}
			if tt.counting == tokens.CountingProvider && tt.status == "over_limit" {
				require.True(t, strings.HasPrefix(res.Outcome.OverLimitReason, "4500 of limit 4000 (the provider's count; o200k_base×1.25 (claude) estimates "),
					res.Outcome.OverLimitReason)
			}
			row, err := u.store.GetRun(t.Context(), u.run.ID)
			require.NoError(t, err)
			stored, err := row.Outcome()
			require.NoError(t, err)
			require.Equal(t, tt.counting, stored.TokenCounting, "the run's row says it too")
		})
	}
}
