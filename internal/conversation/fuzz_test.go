package conversation

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzRoundTrip is the property every adapter must hold: Parse never panics
// and fails only with an *Error; what it accepts renders, the rendering is
// the same JSON value, and it parses back to an equal conversation. The
// one exception is an Anthropic document with same-role neighbours: its
// rendering is that of the merged conversation (MergeSameRole), which it
// parses back to, with roles alternating and the tool pairing kept.
func fuzzRoundTrip(t *testing.T, data []byte, f Format) {
	c, err := Parse(data, f)
	if err != nil {
		var e *Error
		require.True(t, errors.As(err, &e), "parse error is not an *Error: %v", err)
		return
	}
	out, err := Render(c)
	require.NoError(t, err, "render of accepted input")
	want := c.MergeSameRole()
	if len(want.Messages) == len(c.Messages) {
		requireSameJSON(t, data, out)
	} else {
		require.Equal(t, FormatAnthropic, f, "only anthropic merges")
		merged, err := Render(want)
		require.NoError(t, err)
		require.Equal(t, string(merged), string(out), "render merges as MergeSameRole does")
	}
	again, err := Parse(out, f)
	require.NoError(t, err, "re-parse of rendered output: %s", out)
	require.Equal(t, canonical(t, want), canonical(t, again))
	if f == FormatAnthropic {
		requireAlternating(t, again)
	}
	// Pairing checks and indexes must cope with whatever parses, and a
	// merge never breaks a pairing (blocks keep their order).
	if CheckPairing(c) == nil {
		require.NoError(t, CheckPairing(again))
	}
	_ = c.ToolIndex()
	require.Len(t, c.CallerIndexes(), len(c.Messages))
}

// addSeeds adds the sample files of a format to the fuzz corpus (the
// committed corpus under testdata/fuzz holds smaller, sharper cases).
func addSeeds(f *testing.F, pattern string) {
	files, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

func FuzzParseOpenAI(f *testing.F) {
	addSeeds(f, "openai_*.json")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRoundTrip(t, data, FormatOpenAI) })
}

func FuzzParseAnthropic(f *testing.F) {
	addSeeds(f, "anthropic_*.json")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRoundTrip(t, data, FormatAnthropic) })
}

func FuzzParseReAct(f *testing.F) {
	addSeeds(f, "react_*.json")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRoundTrip(t, data, FormatReAct) })
}

// FuzzDetect checks that sniffing never panics and that whatever it
// recognises, ParseAny handles without panicking.
func FuzzDetect(f *testing.F) {
	addSeeds(f, "*.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := Detect(data); err != nil {
			return
		}
		_, _ = ParseAny(data)
	})
}
