package llm

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestScrubProviderText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		absent   []string
	}{
		{"bearer token", "invalid header Authorization: Bearer abcdef0123456789xyz", []string{"abcdef0123456789xyz"}},
		{"sk key", "Incorrect API key provided: sk-proj-AbCdEf0123456789", []string{"sk-proj-AbCdEf0123456789"}},
		{"api_key param", `{"error":"bad","api_key":"k-live-123456"}`, []string{"k-live-123456"}},
		{"password", "password=hunter2hunter2 rejected", []string{"hunter2hunter2"}},
		{"control characters", "bad\x1b[31m request\x00 body\u202e", []string{"\x1b", "\x00", "\u202e"}},
		{"the operator's endpoint", `Post "http://10.0.0.7:8000/v1/chat/completions": dial tcp 10.0.0.7:8000: connection refused`, []string{"http://10.0.0.7:8000/v1", "10.0.0.7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Scrub(tt.in)
			for _, a := range tt.absent {
				require.NotContains(t, got, a)
			}
		})
	}
	echo := "This model's maximum context length is 128000 tokens. Your messages: " + strings.Repeat("SECRET PROMPT TEXT é ", 200)
	got := Scrub(echo)
	require.LessOrEqual(t, len(got), maxDetail+len("…"))
	require.True(t, utf8.ValidString(got), "cut on a character boundary")
	require.True(t, strings.HasPrefix(got, "This model's maximum context length"))
	c := classifier{apiKey: "configured-key-123"}
	require.NotContains(t, c.redact("key configured-key-123 refused"), "configured-key-123")
}
