package tokens

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEncodingForModel(t *testing.T) {
	t.Parallel()
	cases := []struct {
		model, want string
	}{
		{"gpt-4o", O200kBase},
		{"gpt-4o-mini-2024-07-18", O200kBase},
		{"chatgpt-4o-latest", O200kBase},
		{"gpt-4.1", O200kBase},
		{"gpt-4.1-nano", O200kBase},
		{"gpt-4.5-preview", O200kBase},
		{"gpt-5", O200kBase},
		{"gpt-5-mini", O200kBase},
		{"o1", O200kBase},
		{"o1-mini", O200kBase},
		{"o3-mini", O200kBase},
		{"o4-mini", O200kBase},
		{"gpt-4", Cl100kBase},
		{"gpt-4-0613", Cl100kBase},
		{"gpt-4-turbo", Cl100kBase},
		{"gpt-4-32k", Cl100kBase},
		{"gpt-3.5-turbo", Cl100kBase},
		{"gpt-3.5-turbo-16k", Cl100kBase},
		{"gpt-35-turbo", Cl100kBase}, // Azure spelling
		{"text-embedding-3-small", Cl100kBase},
		{"text-embedding-ada-002", Cl100kBase},
		// Case, provider and fine-tune prefixes are ignored.
		{"GPT-4", Cl100kBase},
		{"openai/gpt-3.5-turbo", Cl100kBase},
		{"ft:gpt-3.5-turbo-0613:acme::abc123", Cl100kBase},
		{"ft:gpt-4o-mini-2024-07-18:acme::abc123", O200kBase},
		// Other vendors: o200k_base as an estimate.
		{"claude-sonnet-4-20250514", O200kBase},
		{"deepseek-chat", O200kBase},
		{"gemini-3-pro-preview", O200kBase},
		{"meta-llama/Llama-3.1-70B-Instruct", O200kBase},
		{"", O200kBase},
		{"unknown-model", O200kBase},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, EncodingForModel(tc.model), tc.model)
	}
}

// TestEncodingForModelIsValid: whatever the name, the result is accepted
// by New, so callers can chain them without an error path.
func TestEncodingForModelIsValid(t *testing.T) {
	t.Parallel()
	for _, m := range []string{"gpt-4", "gpt-4o", "claude-3-opus", "x", "ft:", "/"} {
		_, err := New(EncodingForModel(m))
		require.NoError(t, err, m)
	}
}
