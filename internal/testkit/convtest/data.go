package convtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// Read returns the file rel of testdata/conversations, the real agent
// conversations copied into the repository (its README gives their
// provenance and licence), found from this package's source so that a
// test of any package names a file the same way. A missing file fails the
// test: the data is part of the repository.
func Read(t testing.TB, rel string) []byte {
	t.Helper()
	_, here, _, ok := runtime.Caller(0)
	require.True(t, ok, "locate convtest's source")
	path := filepath.Join(filepath.Dir(here), "..", "..", "..", "testdata", "conversations", rel)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("test data %s: %v", path, err)
	}
	return data
}

// Load is the file rel of testdata/conversations (Read), parsed in
// whichever supported format it is.
func Load(t testing.TB, rel string) conversation.Conversation {
	t.Helper()
	c, err := conversation.ParseAny(Read(t, rel))
	require.NoError(t, err, "parse %s", rel)
	return c
}

// Messages decodes the messages[] of a chat document (an OpenAI or
// Anthropic request, a conversation) as its sender wrote them.
func Messages(t testing.TB, data []byte) []json.RawMessage {
	t.Helper()
	var doc struct {
		Messages []json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	return doc.Messages
}
