package webui

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/strategy"
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
		require.Equal(t, b.Level, strategy.LevelFor(b.From/100), "usage at the bottom of %s", b.Level)
		if i > 0 {
			below := math.Nextafter(b.From/100, 0)
			require.Equal(t, levelBands[i-1].Level, strategy.LevelFor(below), "usage just below %s", b.Level)
			require.Equal(t, levelBands[i-1].To, b.From, "bands are contiguous")
		}
	}
	require.Equal(t, strategy.LevelCritical, strategy.LevelFor(5))
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
	for _, want := range []string{"succeeded", "over_limit", "failed", "live", days[89].Day.Format("01-02")} {
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

// svgText is one <text> element of a chart: its text, its box in the
// SVG's coordinates (estimated from its font size) and its style.
type svgText struct {
	Text       string
	X, Y, W, H float64
	Style      string
}

// svgArea is one of the invisible rectangles renderSVG adds.
type svgArea struct{ X, Y, W, H float64 }

// svgDoc is what a chart's SVG says about its layout.
type svgDoc struct {
	Root xml.StartElement
	// Width is the viewBox's.
	Width float64
	Texts []svgText
	Areas map[string]svgArea
}

// parseSVG reads the chart's root element, texts and marked areas. Text
// coordinates are vgsvg's (x, -y) in a group flipped about the height:
// the baseline is at height+y; the box is estimated with textWidth.
func parseSVG(t *testing.T, svg []byte) svgDoc {
	t.Helper()
	var doc struct {
		XMLName xml.Name `xml:"svg"`
		ViewBox string   `xml:"viewBox,attr"`
		Width   string   `xml:"width,attr"`
		G       struct {
			Texts []struct {
				X     float64 `xml:"x,attr"`
				Y     float64 `xml:"y,attr"`
				Style string  `xml:"style,attr"`
				Text  string  `xml:",chardata"`
			} `xml:"text"`
		} `xml:"g"`
		Rects []struct {
			ID string  `xml:"id,attr"`
			X  float64 `xml:"x,attr"`
			Y  float64 `xml:"y,attr"`
			W  float64 `xml:"width,attr"`
			H  float64 `xml:"height,attr"`
		} `xml:"rect"`
	}
	require.NoError(t, xml.Unmarshal(svg, &doc))
	var w, h float64
	_, err := fmt.Sscanf(doc.ViewBox, "0 0 %g %g", &w, &h)
	require.NoError(t, err, "viewBox %q", doc.ViewBox)
	out := svgDoc{Width: w, Areas: map[string]svgArea{}}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := dec.Token()
		require.NoError(t, err)
		if el, ok := tok.(xml.StartElement); ok {
			out.Root = el.Copy()
			break
		}
	}
	for _, tx := range doc.G.Texts {
		var size float64
		for _, part := range strings.Split(tx.Style, ";") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(part), "font-size:"); ok {
				size, err = strconv.ParseFloat(strings.TrimSuffix(v, "px"), 64)
				require.NoError(t, err)
			}
		}
		require.Positive(t, size, "text %q has a font size", tx.Text)
		text := strings.TrimSpace(tx.Text)
		out.Texts = append(out.Texts, svgText{Text: text, X: tx.X, Y: h + tx.Y - size, W: textWidth(text, size), H: size, Style: tx.Style})
	}
	for _, r := range doc.Rects {
		out.Areas[r.ID] = svgArea{X: r.X, Y: r.Y, W: r.W, H: r.H}
	}
	return out
}

// attr is the value of the element's attribute name, "" if none.
func attr(el xml.StartElement, name string) string {
	for _, a := range el.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// overlap reports whether two boxes share any area.
func overlap(ax, ay, aw, ah, bx, by, bw, bh float64) bool {
	return ax < bx+bw && bx < ax+aw && ay < by+bh && by < ay+ah
}

// TestChartsLayout: every chart scales to its container's width, writes
// its text in sans-serif, keeps its legend in a column beside the data
// (never over it) and no two of its texts overlap, with boxes estimated
// as wide as the browser's sans-serif may draw them.
func TestChartsLayout(t *testing.T) {
	t.Parallel()
	start := time.Date(2025, 5, 1, 9, 0, 0, 0, time.UTC)
	timeline := func(n int) []timelinePoint {
		var pts []timelinePoint
		for i := range n {
			pts = append(pts, timelinePoint{N: i + 1, Before: 30000 + int64(i*173), After: 6000 + int64(i*211), Limit: 40000, Replay: i%5 == 3})
		}
		return pts
	}
	var steps []store.Step
	for i := range 14 {
		steps = append(steps, store.Step{Name: fmt.Sprintf("summarize/chunk-%d", i), Attempt: 1 + i%2, Duration: time.Duration(i+1) * 150 * time.Millisecond,
			At: start.Add(time.Duration(i+1) * 200 * time.Millisecond)})
	}
	days := func(n int) []store.DailyRuns {
		var out []store.DailyRuns
		for i := range n {
			out = append(out, store.DailyRuns{Day: start.AddDate(0, 0, i), Succeeded: i % 4, Failed: i % 3, OverLimit: i % 2, TokensSaved: int64(i) * 123457})
		}
		return out
	}
	charts := []struct {
		name   string
		draw   func() ([]byte, error)
		legend []string
	}{
		{"timeline of 2 runs", func() ([]byte, error) { return timelineSVG(timeline(2)) }, []string{"before", "after", "limit (100%)", "GREEN", "CRITICAL"}},
		{"timeline of 9 runs with replays", func() ([]byte, error) { return timelineSVG(timeline(9)) }, []string{"replay (what-if)", "CRITICAL"}},
		{"timeline of 60 runs", func() ([]byte, error) { return timelineSVG(timeline(60)) }, []string{"before", "after", "CRITICAL"}},
		{"a run that changed little", func() ([]byte, error) {
			return timelineSVG([]timelinePoint{{N: 1, Before: 30000, After: 29800, Limit: 40000}})
		}, []string{"before"}},
		{"empty timeline", func() ([]byte, error) { return timelineSVG(nil) }, []string{"limit (100%)", "GREEN"}},
		{"steps", func() ([]byte, error) { return stepsSVG(steps, start) }, []string{"attempt", "failed attempt"}},
		{"one step", func() ([]byte, error) { return stepsSVG(steps[:1], start) }, []string{"attempt", "failed attempt"}},
		{"runs per day, 7 days", func() ([]byte, error) { return dailyRunsSVG(days(7)) }, []string{"succeeded", "over_limit", "failed", "live"}},
		{"runs per day, 30 days", func() ([]byte, error) { return dailyRunsSVG(days(30)) }, []string{"succeeded"}},
		{"runs per day, 90 days", func() ([]byte, error) { return dailyRunsSVG(days(90)) }, []string{"succeeded"}},
		{"tokens saved, 90 days", func() ([]byte, error) { return tokensSavedSVG(days(90)) }, nil},
	}
	for _, tc := range charts {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svg, err := tc.draw()
			require.NoError(t, err)
			doc := parseSVG(t, svg)
			require.Equal(t, "100%", attr(doc.Root, "width"), "the chart scales to its container")
			require.Empty(t, attr(doc.Root, "height"), "the height follows the viewBox's proportions")
			require.NotEmpty(t, attr(doc.Root, "viewBox"))
			require.NotContains(t, string(svg), "Serif", "no serif font")
			require.NotEmpty(t, doc.Texts)
			for _, tx := range doc.Texts {
				require.Contains(t, tx.Style, svgSansFamily, "text %q", tx.Text)
			}
			plotArea, ok := doc.Areas[plotAreaID]
			require.True(t, ok, "the data area is marked")
			legendArea, hasLegend := doc.Areas[legendAreaID]
			require.Equal(t, len(tc.legend) > 0, hasLegend)
			if hasLegend {
				require.False(t, overlap(plotArea.X, plotArea.Y, plotArea.W, plotArea.H, legendArea.X, legendArea.Y, legendArea.W, legendArea.H),
					"the legend is beside the data, not over it")
				require.GreaterOrEqual(t, legendArea.X, plotArea.X+plotArea.W)
			}
			for _, want := range tc.legend {
				i := slices.IndexFunc(doc.Texts, func(tx svgText) bool { return tx.Text == want })
				require.GreaterOrEqual(t, i, 0, "legend entry %q", want)
				tx := doc.Texts[i]
				require.GreaterOrEqual(t, tx.X, legendArea.X, "legend entry %q is in the legend column", want)
				require.LessOrEqual(t, tx.X+tx.W, doc.Width, "legend entry %q fits in the image", want)
			}
			for i, a := range doc.Texts {
				for _, b := range doc.Texts[i+1:] {
					require.False(t, overlap(a.X, a.Y, a.W, a.H, b.X, b.Y, b.W, b.H), "texts %q and %q overlap", a.Text, b.Text)
				}
			}
		})
	}
}
