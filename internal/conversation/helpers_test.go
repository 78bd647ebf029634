package conversation

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// dataDir holds the real agent conversations, copied into the repository
// (testdata/conversations/README.md gives their provenance and licence).
const dataDir = "../../testdata/conversations"

// readData reads a file of dataDir. A missing file fails the test: the data
// is part of the repository.
func readData(t testing.TB, rel string) []byte {
	t.Helper()
	path := filepath.Join(dataDir, rel)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("test data %s: %v", path, err)
	}
	return data
}

// dataFiles returns the files of dataDir matching pattern and fails the
// test when there are none.
func dataFiles(t testing.TB, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dataDir, pattern))
	if err != nil || len(files) == 0 {
		t.Fatalf("test data %s: no files (%v)", filepath.Join(dataDir, pattern), err)
	}
	return files
}

// jsonValue decodes a document for semantic comparison. UseNumber keeps
// numbers as their text, which is stricter than float64 and accepts numbers
// float64 cannot hold.
func jsonValue(t testing.TB, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	return v
}

// requireSameJSON asserts two documents are the same JSON value.
func requireSameJSON(t testing.TB, want, got []byte) {
	t.Helper()
	require.Equal(t, jsonValue(t, want), jsonValue(t, got))
}

// canonical normalises the parts of a conversation that legitimately differ
// after a render and re-parse: raw JSON is compacted by Render, and empty
// maps and slices are the same as nil ones.
func canonical(t testing.TB, c Conversation) Conversation {
	t.Helper()
	c = c.Clone()
	c.Extra = compactExtra(t, c.Extra)
	if len(c.Messages) == 0 {
		c.Messages = nil
	}
	for i := range c.Messages {
		m := &c.Messages[i]
		m.Extra = compactExtra(t, m.Extra)
		if len(m.Blocks) == 0 {
			m.Blocks = nil
		}
		for j := range m.Blocks {
			b := &m.Blocks[j]
			b.Extra = compactExtra(t, b.Extra)
			if c.Format != FormatOpenAI && b.Kind == KindToolUse && b.Input != "" {
				b.Input = compactText(t, b.Input)
			}
			if hasShape(b.Shape, shapeRaw) {
				b.Text = compactText(t, b.Text)
			}
		}
	}
	return c
}

func compactExtra(t testing.TB, m map[string]json.RawMessage) map[string]json.RawMessage {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		out[k] = json.RawMessage(compactText(t, string(v)))
	}
	return out
}

func compactText(t testing.TB, s string) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, json.Compact(&buf, []byte(s)))
	return buf.String()
}

// roundTrip parses data, renders it, and checks that the output is the same
// JSON value and parses back to the same conversation.
func roundTrip(t testing.TB, data []byte, f Format) Conversation {
	t.Helper()
	c, err := Parse(data, f)
	require.NoError(t, err)
	out, err := Render(c)
	require.NoError(t, err)
	requireSameJSON(t, data, out)
	again, err := Parse(out, f)
	require.NoError(t, err)
	require.Equal(t, canonical(t, c), canonical(t, again))
	// Rendering is deterministic.
	out2, err := Render(again)
	require.NoError(t, err)
	require.Equal(t, string(out), string(out2))
	return c
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Clean(path))
	require.NoError(t, err)
	return data
}
