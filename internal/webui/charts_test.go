package webui

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/compress"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// svgTexts parses an SVG document as XML (failing the test when it is
// not) and returns the text of its <text> elements.
func svgTexts(t *testing.T, svg []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var texts []string
	var root string
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "the SVG is not well-formed XML")
		switch el := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = el.Name.Local
			}
			inText = el.Name.Local == "text"
		case xml.EndElement:
			inText = false
		case xml.CharData:
			if inText {
				texts = append(texts, strings.TrimSpace(string(el)))
			}
		}
	}
	require.Equal(t, "svg", root)
	return texts
}

func TestLevelBandsMatchLevelFor(t *testing.T) {
	t.Parallel()
	for i, b := range levelBands {
		require.Equal(t, b.Level, compress.LevelFor(b.From/100), "usage at the bottom of %s", b.Level)
		if i > 0 {
			below := math.Nextafter(b.From/100, 0)
			require.Equal(t, levelBands[i-1].Level, compress.LevelFor(below), "usage just below %s", b.Level)
			require.Equal(t, levelBands[i-1].To, b.From, "bands are contiguous")
		}
	}
	require.Equal(t, compress.LevelCritical, compress.LevelFor(5))
}

func TestTimelineSVG(t *testing.T) {
	t.Parallel()
	start := time.Date(2025, 5, 1, 9, 0, 0, 0, time.UTC)
	points := []timelinePoint{
		{N: 1, Before: 31262, After: 5426, Limit: 40000, Started: start},
		{N: 2, Before: 36000, After: 21000, Limit: 40000, Started: start.Add(time.Hour)},
		{N: 3, Before: 52000, After: 41000, Limit: 40000, Started: start.Add(2 * time.Hour)},
	}
	svg, err := timelineSVG(points)
	require.NoError(t, err)
	texts := svgTexts(t, svg)
	for _, want := range []string{
		"31,262", "5,426 GREEN", "36,000", "21,000 ORANGE", "52,000", "41,000 CRITICAL", // every point labelled
		"#1", "#2", "#3", "GREEN", "YELLOW", "ORANGE", "RED", "CRITICAL", "limit (100%)", "before", "after",
		"% of the context limit",
	} {
		require.Contains(t, texts, want)
	}

	empty, err := timelineSVG(nil)
	require.NoError(t, err)
	require.Contains(t, svgTexts(t, empty), "CRITICAL")
}

func TestStepsSVG(t *testing.T) {
	t.Parallel()
	start := time.Date(2025, 5, 1, 9, 0, 0, 0, time.UTC)
	steps := []store.Step{
		{Name: "plan", Attempt: 1, Duration: 20 * time.Millisecond, At: start.Add(25 * time.Millisecond)},
		{Name: "summarize <chunk> & \"merge\"\x01", Attempt: 1, Duration: 2 * time.Second, Error: "429", At: start.Add(2100 * time.Millisecond)},
		{Name: "summarize <chunk> & \"merge\"\x01", Attempt: 2, Duration: 1500 * time.Millisecond, At: start.Add(3700 * time.Millisecond)},
		// A clock behind the run's start: drawn from 0.
		{Name: "commit", Attempt: 1, Duration: 300 * time.Microsecond, At: start.Add(-time.Second)},
	}
	svg, err := stepsSVG(steps, start)
	require.NoError(t, err)
	texts := svgTexts(t, svg)
	for _, want := range []string{"plan #1", `summarize <chunk> & "merge"? #1`, `summarize <chunk> & "merge"? #2`, "commit #1",
		"20ms", "2.0s error", "1.5s", "300µs", "failed attempt"} {
		require.Contains(t, texts, want)
	}

	none, err := stepsSVG(nil, start)
	require.NoError(t, err)
	require.Contains(t, svgTexts(t, none), "No step recorded")
}

func TestDailySVGs(t *testing.T) {
	t.Parallel()
	day := time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)
	var days []store.DailyRuns
	for i := range 90 {
		days = append(days, store.DailyRuns{Day: day.AddDate(0, 0, i), Succeeded: i % 3, Failed: i % 2, TokensSaved: int64(i * 1500)})
	}
	runs, err := dailyRunsSVG(days)
	require.NoError(t, err)
	texts := svgTexts(t, runs)
	for _, want := range []string{"succeeded", "over_limit", "failed", "skipped or live", days[89].Day.Format("01-02")} {
		require.Contains(t, texts, want)
	}
	tokens, err := tokensSavedSVG(days[:7])
	require.NoError(t, err)
	texts = svgTexts(t, tokens)
	require.Contains(t, texts, days[6].Day.Format("01-02"))
	require.Contains(t, texts, "Tokens saved per day (UTC)")

	zero, err := dailyRunsSVG([]store.DailyRuns{{Day: day}})
	require.NoError(t, err)
	svgTexts(t, zero)
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 31262: "31,262", 1234567: "1,234,567", -4500: "-4,500"} {
		require.Equal(t, want, thousands(n))
	}
}
