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
// the same JSON value, and it parses back to an equal conversation.
func fuzzRoundTrip(t *testing.T, data []byte, f Format) {
	c, err := Parse(data, f)
	if err != nil {
		var e *Error
		require.True(t, errors.As(err, &e), "parse error is not an *Error: %v", err)
		return
	}
	out, err := Render(c)
	require.NoError(t, err, "render of accepted input")
	requireSameJSON(t, data, out)
	again, err := Parse(out, f)
	require.NoError(t, err, "re-parse of rendered output: %s", out)
	require.Equal(t, canonical(t, c), canonical(t, again))
	// Pairing checks and indexes must cope with whatever parses.
	_ = CheckPairing(c)
	_ = c.ToolIndex()
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
