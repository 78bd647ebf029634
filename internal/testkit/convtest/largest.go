package convtest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// LargestResult returns the longest string content of a conversation of
// testdata/conversations (rel is its path there, e.g.
// "swe-agent-gemini/psf__requests-1142.json"). In the swe-agent-gemini
// files the huge command outputs are role "user" messages (the agent's
// <returncode> feedback), so every role is searched. A missing file fails
// the test: the data is part of the repository.
func LargestResult(t testing.TB, rel string) string {
	t.Helper()
	raw := Read(t, rel)
	var conv struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(raw, &conv), "decode %s", rel)
	best := ""
	for i, m := range conv.Messages {
		var s string
		if len(m.Content) == 0 || m.Content[0] != '"' {
			continue
		}
		require.NoError(t, json.Unmarshal(m.Content, &s), "decode content of message %d", i)
		if len(s) > len(best) {
			best = s
		}
	}
	require.NotEmpty(t, best)
	return best
}
