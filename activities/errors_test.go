package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestClassify: every activity error ends classified once; an error no
// dependency classified is a bug or bad input and stops the run at once.
func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		err       error
		wantType  string
		retryable bool
	}{
		{"plain error", errors.New("render output: unexpected shape"), TypeInternal, false},
		{"wrapped plain error", fmt.Errorf("write compression stats: %w", errors.New("no place")), TypeInternal, false},
		{"S3 timeout retries", blobErr(fmt.Errorf("read x: %w", context.DeadlineExceeded)), TypeUnavailable, true},
		{"S3 not found stops", blobErr(fmt.Errorf("read x: %w", blob.ErrNotFound)), TypeDependency, false},
		{"bad input stays bad input", badInput(errors.New("message 3: field content")), TypeBadInput, false},
		{"config stays config", config(errors.New("unknown stage")), TypeConfig, false},
		{"wrapped retryable keeps its class outside", fmt.Errorf("read input: %w", blobErr(context.DeadlineExceeded)), TypeUnavailable, true},
		{"wrapped bad input keeps its class outside", fmt.Errorf("read input: %w", badInput(errors.New("not ours"))), TypeBadInput, false},
		// A worker stopping gracefully cancels the steps in flight: the
		// step runs again, it does not fail the run.
		{"Postgres call canceled by a worker stop retries", storeErr(fmt.Errorf("count live runs: %w", context.Canceled)), TypeUnavailable, true},
		{"S3 call canceled by a worker stop retries", blobErr(fmt.Errorf("read x: %w", context.Canceled)), TypeUnavailable, true},
		{"Postgres not found still stops", storeErr(fmt.Errorf("read run: %w", store.ErrNotFound)), TypeBadInput, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := classify(tt.err)
			app, ok := got.(*temporal.ApplicationError)
			require.True(t, ok, "the outermost error is the classified one: %T", got)
			require.Equal(t, tt.wantType, app.Type())
			require.Equal(t, !tt.retryable, app.NonRetryable())
			require.Contains(t, got.Error(), tt.err.Error(), "the message is kept")
		})
	}
	require.NoError(t, classify(nil))
	require.ErrorIs(t, classify(context.Canceled), context.Canceled, "a cancellation is not an error to classify")
}

func TestChunkCharsBoundsTheChunks(t *testing.T) {
	t.Parallel()
	require.Equal(t, 50000, chunkChars(300000, 50000), "the preset's size when it makes few chunks")
	n := 30 << 20
	size := chunkChars(n, 10)
	require.LessOrEqual(t, (n+size-1)/size, MaxChunks, "a 30 MB result makes at most MaxChunks chunks")
}

// throughTemporal is err as a workflow sees it: converted to a failure
// and back, wrapped like an activity error with the worker's identity,
// and with the workflow's step prefix.
func throughTemporal(step string, err error) error {
	conv := temporal.GetDefaultFailureConverter()
	back := conv.FailureToError(conv.ErrorToFailure(err))
	return fmt.Errorf("%s: activity error (type: Plan, scheduledEventID: 5, startedEventID: 6, identity: 4711@worker-7.internal): %w", step, back)
}

// TestDescribe: callers get a class and a message naming the step; no
// SQLSTATE, Temporal chain, worker identity or dependency's own words,
// but bad input and the summarizer's scrubbed refusal keep their text.
func TestDescribe(t *testing.T) {
	t.Parallel()
	pgErr := &pgconn.PgError{Severity: "ERROR", Code: "22P05", Message: `unsupported Unicode escape sequence`,
		Detail: `\u0000 cannot be converted to text.`, Where: "offloads row 3"}
	tests := []struct {
		name     string
		err      error
		class    store.ErrorClass
		contains []string
		leaves   []string // must not appear
	}{
		{"postgres rejects a row", throughTemporal("history", classify(storeErr(fmt.Errorf("insert offload: %w", pgErr)))),
			store.ErrorDependency, []string{"history: ", "Postgres or S3 failed"}, []string{"SQLSTATE", "22P05", "Unicode", "offloads row"}},
		{"S3 down through every retry", throughTemporal("archive", classify(blobErr(fmt.Errorf("put x: %w", context.DeadlineExceeded)))),
			store.ErrorDependency, []string{"archive: ", "unavailable"}, []string{"deadline"}},
		{"bad input keeps its words", throughTemporal("plan", classify(badInput(errors.New("parse conversation: message 3: content is a number")))),
			store.ErrorBadInput, []string{"plan: ", "message 3: content is a number"}, nil},
		{"config", throughTemporal("plan", classify(config(errors.New("preset file /etc/compactor/presets.yaml line 4")))),
			store.ErrorConfig, []string{"plan: ", "configuration"}, []string{"/etc/compactor"}},
		{"a bug", throughTemporal("deterministic", classify(errors.New("index out of range [7] with length 3 at 0xc000123"))),
			store.ErrorInternal, []string{"deterministic: internal error"}, []string{"0xc000", "range"}},
		{"summarizer refusal", throughTemporal("summarize", llmErr(&llm.Error{Kind: llm.Auth, Status: 401, Message: "invalid api key"})),
			store.ErrorSummarizer, []string{"summarize: the summarizer refused the request", "invalid api key", "HTTP 401"}, []string{"errorString"}},
		{"summarizer 429 keeps its Retry-After", llmErr(&llm.Error{Kind: llm.RateLimited, Status: 429, Message: "slow down", RetryAfter: time.Second}),
			store.ErrorSummarizer, []string{"the summarizer failed", "(retry after 1s)"}, nil},
		{"an unreachable summarizer names no endpoint", throughTemporal("summarize", llmErr(&llm.Error{Kind: llm.Unknown,
			Message: `call to http://llm.internal.example:8000/v1 failed: Post "[endpoint]": dial tcp 10.1.2.3:8000: connect: connection refused`})),
			store.ErrorSummarizer, []string{"the summarizer failed", "connection refused"}, []string{"llm.internal.example", "10.1.2.3", "8000"}},
		{"canceled", fmt.Errorf("history: %w", temporal.NewCanceledError()), store.ErrorCanceled, []string{"history: the run was canceled"}, nil},
		{"timeout", throughTemporal("summarize", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)),
			store.ErrorTimeout, []string{"summarize: ran out of time"}, nil},
		{"no step prefix", errors.New("Something: odd"), store.ErrorInternal, []string{"internal error"}, []string{"Something"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			class, msg := Describe(tt.err)
			require.Equal(t, tt.class, class, msg)
			for _, want := range tt.contains {
				require.Contains(t, msg, want)
			}
			for _, leak := range append(tt.leaves, "identity", "worker-7", "scheduledEventID", "activity error") {
				require.NotContains(t, msg, leak)
			}
		})
	}
	long, msg := Describe(badInput(errors.New(strings.Repeat("é", 400) + "\x00\x1b[31m")))
	require.Equal(t, store.ErrorBadInput, long)
	require.LessOrEqual(t, len(msg), maxPublicMessage+len("…"))
	require.True(t, utf8.ValidString(msg))
	class, msg := Describe(nil)
	require.Empty(t, class)
	require.Empty(t, msg)
}

// TestSessionSummaryNamesEveryRecoveryReference: the three-tier
// session summary's recovery references name the archive, the offloads
// and the checkpoints (seed 004's three), whatever the summarizer wrote,
// each once.
func TestSessionSummaryNamesEveryRecoveryReference(t *testing.T) {
	t.Parallel()
	key := blob.ContentKey("acme", blob.KindArchive, strings.Repeat("ab", 32))
	out := sessionSummary(contract.Run{Session: "s1"}, "### Session Intent\n- fix it", key)
	for _, want := range []string{"### Recovery References", "- Full conversation: ", "- Offloaded content: ", "- Checkpoints: "} {
		require.Equal(t, 1, strings.Count(out, want), "%q in:\n%s", want, out)
	}
	require.Equal(t, out, sessionSummary(contract.Run{Session: "s1"}, out, key), "nothing added twice")
}

// TestCauseCrossesTemporal: the summarizer's netcause word rides its
// application error as a detail, survives the wrapping classify adds and
// the round trip through a failure (as a workflow reads it from history),
// and is "" for an error that has none.
func TestCauseCrossesTemporal(t *testing.T) {
	t.Parallel()
	fc := temporal.GetDefaultFailureConverter()
	through := func(err error) error { return fc.FailureToError(fc.ErrorToFailure(err)) }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"refused", llmErr(&llm.Error{Kind: llm.Unknown, Cause: "refused", Message: "call to the summarizer failed"}), "refused"},
		{"503", llmErr(&llm.Error{Kind: llm.ServerError, Status: 503, Cause: "http 503", Message: "server error"}), "http 503"},
		{"rejected", llmErr(&llm.Error{Kind: llm.Auth, Status: 401, Cause: "http 401", Message: "bad key"}), "http 401"},
		{"wrapped by a step", classify(fmt.Errorf("summarize: %w", llmErr(&llm.Error{Kind: llm.Timeout, Cause: "timeout", Message: "no answer"}))), "timeout"},
		{"none", blobErr(context.DeadlineExceeded), ""},
		{"plain", errors.New("x"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, Cause(tc.err))
			require.Equal(t, tc.want, Cause(through(tc.err)), "read back from a failure")
		})
	}
}
