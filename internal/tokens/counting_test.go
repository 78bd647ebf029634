package tokens

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

func TestLocalCounting(t *testing.T) {
	t.Parallel()
	cases := []struct {
		model, encoding, want string
		claude                bool
	}{
		{"gpt-4o", O200kBase, CountingEncoding, false},
		{"openai/GPT-4.1", O200kBase, CountingEncoding, false},
		{"ft:gpt-4o-mini:org::id", O200kBase, CountingEncoding, false},
		{"gpt-3.5-turbo", Cl100kBase, CountingEncoding, false},
		{"o3-mini", O200kBase, CountingEncoding, false},
		{"claude-sonnet-4-5", O200kBase, CountingEstimate, true},
		{"anthropic/Claude-Opus-4-1", O200kBase, CountingEstimate, true},
		{"gemini-2.5-pro", O200kBase, CountingEstimate, false},
		{"llama-3.1-70b", O200kBase, CountingEstimate, false},
		{"claude-sonnet-4-5", Chars, CountingEncoding, true},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, LocalCounting(tc.model, tc.encoding), tc.model)
		require.Equal(t, tc.claude, IsClaude(tc.model), tc.model)
	}
}

// fakeProvider counts every conversation as n, or fails with err.
type fakeProvider struct {
	n     int
	err   error
	calls int
}

func (f *fakeProvider) Handles(model string) bool { return IsClaude(model) }

func (f *fakeProvider) CountConversation(context.Context, string, conversation.Conversation) (int, error) {
	f.calls++
	return f.n, f.err
}

func TestMeasureConversation(t *testing.T) {
	t.Parallel()
	conv := conversation.Conversation{Format: conversation.FormatAnthropic,
		Messages: []conversation.Message{{Role: conversation.RoleUser, Blocks: []conversation.Block{{Kind: conversation.KindText, Text: "hi"}}}}}
	down := errors.New("HTTP 529 overloaded_error")
	cases := []struct {
		name      string
		provider  *fakeProvider
		model     string
		encoding  string
		want      Measured
		calls     int
		wantError bool
	}{
		{"claude, provider answers", &fakeProvider{n: 40}, "claude-sonnet-4-5", O200kBase, Measured{45, CountingProvider}, 1, false},
		{"claude, provider fails", &fakeProvider{err: down}, "claude-sonnet-4-5", O200kBase, Measured{100, CountingEstimate}, 1, true},
		{"claude, no faithful request", &fakeProvider{err: fmt.Errorf("react: %w", ErrNoProviderCount)}, "claude-sonnet-4-5", O200kBase, Measured{100, CountingEstimate}, 1, false},
		{"claude, no provider", nil, "claude-sonnet-4-5", O200kBase, Measured{100, CountingEstimate}, 0, false},
		{"claude counted in characters", &fakeProvider{n: 40}, "claude-sonnet-4-5", Chars, Measured{100, CountingEncoding}, 0, false},
		{"openai model", &fakeProvider{n: 40}, "gpt-4o", O200kBase, Measured{100, CountingEncoding}, 0, false},
		{"gemini", &fakeProvider{n: 40}, "gemini-2.5-pro", O200kBase, Measured{100, CountingEstimate}, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var p ProviderCounter
			if tc.provider != nil {
				p = tc.provider
			}
			got, err := MeasureConversation(context.Background(), p, tc.model, tc.encoding, 5, conv, func() int { return 100 })
			require.Equal(t, tc.want, got)
			if tc.wantError {
				require.ErrorIs(t, err, down)
			} else {
				require.NoError(t, err)
			}
			if tc.provider != nil {
				require.Equal(t, tc.calls, tc.provider.calls)
			}
		})
	}
}
