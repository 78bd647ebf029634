package webui

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strings"
	"time"
	"unicode"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/ctxcompact/orchestrator/internal/compress"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// band is one of the three-tier status levels as a range of context usage, in
// percent of the limit. The bounds are compress.LevelFor's (a test keeps
// the two in step).
type band struct {
	Level    compress.Level
	From, To float64 // percent; To of the last band is open
	Color    color.Color
}

// levelBands are the GREEN…CRITICAL bands, lowest first.
var levelBands = []band{
	{compress.LevelGreen, 0, 25, color.NRGBA{R: 0x2e, G: 0xa0, B: 0x43, A: 0x38}},
	{compress.LevelYellow, 25, 50, color.NRGBA{R: 0xe6, G: 0xc2, B: 0x00, A: 0x40}},
	{compress.LevelOrange, 50, 75, color.NRGBA{R: 0xf0, G: 0x88, B: 0x1a, A: 0x40}},
	{compress.LevelRed, 75, 85, color.NRGBA{R: 0xd7, G: 0x30, B: 0x27, A: 0x40}},
	{compress.LevelCritical, 85, math.Inf(1), color.NRGBA{R: 0x80, G: 0x00, B: 0x26, A: 0x48}},
}

// Chart colours.
var (
	colorBefore  = color.NRGBA{R: 0x6b, G: 0x72, B: 0x80, A: 0xff}
	colorAfter   = color.NRGBA{R: 0x1f, G: 0x4e, B: 0xd8, A: 0xff}
	colorOK      = color.NRGBA{R: 0x2e, G: 0xa0, B: 0x43, A: 0xff}
	colorOver    = color.NRGBA{R: 0xf0, G: 0x88, B: 0x1a, A: 0xff}
	colorFailed  = color.NRGBA{R: 0xd7, G: 0x30, B: 0x27, A: 0xff}
	colorOther   = color.NRGBA{R: 0x9c, G: 0xa3, B: 0xaf, A: 0xff}
	colorLimit   = color.NRGBA{R: 0x11, G: 0x11, B: 0x11, A: 0xff}
	colorConnect = color.NRGBA{R: 0x6b, G: 0x72, B: 0x80, A: 0x90}
)

// timelinePoint is one run of a session on the token timeline.
type timelinePoint struct {
	// N numbers the run in the session, from 1, oldest first.
	N       int
	Before  int64
	After   int64
	Limit   int64
	Unit    string
	Started time.Time
	// Level is the level the run recorded after it; "" computes it.
	Level string
}

// usage is size as a percentage of limit.
func usage(size, limit int64) float64 {
	if limit <= 0 {
		return 0
	}
	return float64(size) / float64(limit) * 100
}

// timelineSVG draws a session's token timeline: each run's size before
// and after, as a percentage of its context limit, over the level bands,
// with the limit at 100% and every point labelled with its size.
func timelineSVG(points []timelinePoint) ([]byte, error) {
	p := plot.New()
	p.Title.Text = "Context usage before and after each run"
	p.X.Label.Text = "run"
	p.Y.Label.Text = "% of the context limit"
	p.Legend.Top = true
	p.Legend.Left = true

	xmin, xmax := 0.5, float64(max(len(points), 1))+0.5
	ymax := 110.0
	for _, pt := range points {
		ymax = math.Max(ymax, usage(pt.Before, pt.Limit)*1.12)
	}
	p.X.Min, p.X.Max = xmin, xmax
	p.Y.Min, p.Y.Max = 0, ymax

	for _, b := range levelBands {
		top := math.Min(b.To, ymax)
		poly, err := plotter.NewPolygon(plotter.XYs{{X: xmin, Y: b.From}, {X: xmax, Y: b.From}, {X: xmax, Y: top}, {X: xmin, Y: top}})
		if err != nil {
			return nil, fmt.Errorf("timeline band %s: %w", b.Level, err)
		}
		poly.Color = b.Color
		poly.LineStyle.Width = 0
		p.Add(poly)
		// The band's name at its right end.
		names, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: xmax, Y: (b.From + top) / 2}}, Labels: []string{string(b.Level)}})
		if err != nil {
			return nil, fmt.Errorf("timeline band label: %w", err)
		}
		for i := range names.TextStyle {
			names.TextStyle[i].XAlign = draw.XRight
			names.TextStyle[i].YAlign = draw.YCenter
			names.TextStyle[i].Color = color.NRGBA{A: 0x99}
			names.TextStyle[i].Font.Size = vg.Points(8)
		}
		names.Offset = vg.Point{X: -vg.Points(3)}
		p.Add(names)
	}

	limit, err := plotter.NewLine(plotter.XYs{{X: xmin, Y: 100}, {X: xmax, Y: 100}})
	if err != nil {
		return nil, fmt.Errorf("timeline limit: %w", err)
	}
	limit.Color = colorLimit
	limit.Width = vg.Points(1)
	limit.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	p.Add(limit)
	p.Legend.Add("limit (100%)", limit)

	if len(points) > 0 {
		before := make(plotter.XYs, len(points))
		after := make(plotter.XYs, len(points))
		var beforeLabels, afterLabels, ticks []string
		for i, pt := range points {
			before[i] = plotter.XY{X: float64(i + 1), Y: usage(pt.Before, pt.Limit)}
			after[i] = plotter.XY{X: float64(i + 1), Y: usage(pt.After, pt.Limit)}
			beforeLabels = append(beforeLabels, thousands(pt.Before))
			level := pt.Level
			if level == "" {
				level = string(compress.LevelFor(usage(pt.After, pt.Limit) / 100))
			}
			afterLabels = append(afterLabels, thousands(pt.After)+" "+level)
			ticks = append(ticks, fmt.Sprintf("#%d", pt.N))
		}
		// Each run: a line from its size before to its size after.
		for i := range points {
			seg, err := plotter.NewLine(plotter.XYs{before[i], after[i]})
			if err != nil {
				return nil, fmt.Errorf("timeline run %d: %w", i+1, err)
			}
			seg.Color = colorConnect
			seg.Width = vg.Points(1.5)
			p.Add(seg)
		}
		// The session's size after each run, run to run.
		if len(points) > 1 {
			trend, err := plotter.NewLine(after)
			if err != nil {
				return nil, fmt.Errorf("timeline trend: %w", err)
			}
			trend.Color = colorAfter
			trend.Width = vg.Points(0.75)
			trend.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
			p.Add(trend)
		}
		sb, err := plotter.NewScatter(before)
		if err != nil {
			return nil, fmt.Errorf("timeline before: %w", err)
		}
		sb.GlyphStyle = draw.GlyphStyle{Color: colorBefore, Radius: vg.Points(3.5), Shape: draw.CircleGlyph{}}
		sa, err := plotter.NewScatter(after)
		if err != nil {
			return nil, fmt.Errorf("timeline after: %w", err)
		}
		sa.GlyphStyle = draw.GlyphStyle{Color: colorAfter, Radius: vg.Points(3.5), Shape: draw.CircleGlyph{}}
		p.Add(sb, sa)
		p.Legend.Add("before", sb)
		p.Legend.Add("after", sa)

		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: before, Labels: beforeLabels})
		if err != nil {
			return nil, fmt.Errorf("timeline labels: %w", err)
		}
		la, err := plotter.NewLabels(plotter.XYLabels{XYs: after, Labels: afterLabels})
		if err != nil {
			return nil, fmt.Errorf("timeline labels: %w", err)
		}
		for _, l := range []*plotter.Labels{lb, la} {
			for i := range l.TextStyle {
				l.TextStyle[i].Font.Size = vg.Points(8)
				l.TextStyle[i].XAlign = draw.XLeft
				l.TextStyle[i].YAlign = draw.YCenter
			}
			l.Offset = vg.Point{X: vg.Points(6)}
		}
		p.Add(lb, la)
		p.X.Tick.Marker = indexTicks(ticks)
	} else {
		p.X.Tick.Marker = indexTicks(nil)
	}
	return renderSVG(p, 10*vg.Inch, 4.2*vg.Inch)
}

// indexTicks labels the integer positions 1..len(names) with names.
func indexTicks(names []string) plot.Ticker {
	return plot.TickerFunc(func(_, _ float64) []plot.Tick {
		ticks := make([]plot.Tick, 0, len(names))
		every := max(1, len(names)/25)
		for i, n := range names {
			label := n
			if i%every != 0 {
				label = ""
			}
			ticks = append(ticks, plot.Tick{Value: float64(i + 1), Label: label})
		}
		return ticks
	})
}

// stepsSVG draws a run's steps as a timeline: one bar per step attempt,
// from when it started to when it ended (seconds since the run started),
// red for an attempt that failed, labelled with its duration.
func stepsSVG(steps []store.Step, runStart time.Time) ([]byte, error) {
	n := len(steps)
	offsets := make(plotter.Values, n)
	okDur := make(plotter.Values, n)
	errDur := make(plotter.Values, n)
	names := make([]string, n)
	ends := make(plotter.XYs, n)
	labels := make([]string, n)
	// Top to bottom in order: NominalY counts from the bottom.
	for i, st := range steps {
		row := n - 1 - i
		startOff := st.At.Add(-st.Duration).Sub(runStart).Seconds()
		if runStart.IsZero() || startOff < 0 {
			startOff = 0
		}
		d := st.Duration.Seconds()
		offsets[row] = startOff
		if st.Error != "" {
			errDur[row] = d
		} else {
			okDur[row] = d
		}
		names[row] = chartText(fmt.Sprintf("%s #%d", st.Name, st.Attempt))
		ends[row] = plotter.XY{X: startOff + d, Y: float64(row)}
		label := shortDuration(st.Duration)
		if st.Error != "" {
			label += " error"
		}
		labels[row] = label
	}
	p := plot.New()
	p.Title.Text = "Step attempts (seconds since the run started)"
	p.X.Label.Text = "seconds"
	p.X.Min = 0
	height := 1.3*vg.Inch + vg.Length(max(n, 1))*0.24*vg.Inch
	if n == 0 {
		p.Title.Text = "No step recorded"
		return renderSVG(p, 10*vg.Inch, height)
	}
	const barWidth = 11
	wait, err := plotter.NewBarChart(offsets, vg.Points(barWidth))
	if err != nil {
		return nil, fmt.Errorf("steps chart: %w", err)
	}
	wait.Horizontal = true
	wait.Color = color.Transparent
	wait.LineStyle.Width = 0
	ok, err := plotter.NewBarChart(okDur, vg.Points(barWidth))
	if err != nil {
		return nil, fmt.Errorf("steps chart: %w", err)
	}
	ok.Horizontal = true
	ok.Color = colorAfter
	ok.LineStyle.Width = 0
	ok.StackOn(wait)
	failed, err := plotter.NewBarChart(errDur, vg.Points(barWidth))
	if err != nil {
		return nil, fmt.Errorf("steps chart: %w", err)
	}
	failed.Horizontal = true
	failed.Color = colorFailed
	failed.LineStyle.Width = 0
	failed.StackOn(ok)
	p.Add(wait, ok, failed)
	lab, err := plotter.NewLabels(plotter.XYLabels{XYs: ends, Labels: labels})
	if err != nil {
		return nil, fmt.Errorf("steps labels: %w", err)
	}
	for i := range lab.TextStyle {
		lab.TextStyle[i].Font.Size = vg.Points(7.5)
		lab.TextStyle[i].YAlign = draw.YCenter
	}
	lab.Offset = vg.Point{X: vg.Points(4)}
	p.Add(lab)
	p.Legend.Add("attempt", ok)
	p.Legend.Add("failed attempt", failed)
	p.Legend.Top = true
	p.NominalY(names...)
	// Room for the last label.
	_, xmax, _, _ := lab.DataRange()
	p.X.Max = math.Max(xmax*1.15, 0.01)
	return renderSVG(p, 10*vg.Inch, height)
}

// dailyRunsSVG draws the runs of each day, stacked by outcome.
func dailyRunsSVG(days []store.DailyRuns) ([]byte, error) {
	p := plot.New()
	p.Title.Text = "Runs per day (UTC) by outcome"
	p.Y.Label.Text = "runs"
	series := []struct {
		name  string
		color color.Color
		value func(store.DailyRuns) int
	}{
		{"succeeded", colorOK, func(d store.DailyRuns) int { return d.Succeeded }},
		{"over_limit", colorOver, func(d store.DailyRuns) int { return d.OverLimit }},
		{"failed", colorFailed, func(d store.DailyRuns) int { return d.Failed }},
		{"skipped or live", colorOther, func(d store.DailyRuns) int { return d.Skipped + d.Live }},
	}
	width := barWidth(len(days))
	var below *plotter.BarChart
	for _, s := range series {
		vals := make(plotter.Values, len(days))
		for i, d := range days {
			vals[i] = float64(s.value(d))
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, fmt.Errorf("runs per day: %w", err)
		}
		bars.Color = s.color
		bars.LineStyle.Width = 0
		if below != nil {
			bars.StackOn(below)
		}
		below = bars
		p.Add(bars)
		p.Legend.Add(s.name, bars)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Min = 0
	// Headroom for the legend above the tallest bar.
	p.Y.Max = math.Max(p.Y.Max*1.6, 1)
	p.NominalX(dayNames(days)...)
	return renderSVG(p, 10*vg.Inch, 3.4*vg.Inch)
}

// tokensSavedSVG draws the tokens saved each day.
func tokensSavedSVG(days []store.DailyRuns) ([]byte, error) {
	p := plot.New()
	p.Title.Text = "Tokens saved per day (UTC)"
	p.Y.Label.Text = "tokens"
	vals := make(plotter.Values, len(days))
	for i, d := range days {
		vals[i] = float64(d.TokensSaved)
	}
	bars, err := plotter.NewBarChart(vals, barWidth(len(days)))
	if err != nil {
		return nil, fmt.Errorf("tokens saved: %w", err)
	}
	bars.Color = colorAfter
	bars.LineStyle.Width = 0
	p.Add(bars)
	p.Y.Tick.Marker = thousandsTicks{}
	p.NominalX(dayNames(days)...)
	return renderSVG(p, 10*vg.Inch, 3.4*vg.Inch)
}

// barWidth fits n bars in the plot's width.
func barWidth(n int) vg.Length {
	return vg.Points(math.Max(2, math.Min(24, 560/float64(max(n, 1))*0.7)))
}

// dayNames labels days as MM-DD, thinned so that the labels do not
// overlap.
func dayNames(days []store.DailyRuns) []string {
	names := make([]string, len(days))
	every := max(1, len(days)/15)
	for i, d := range days {
		if (len(days)-1-i)%every == 0 {
			names[i] = d.Day.Format("01-02")
		}
	}
	return names
}

// thousandsTicks is the default ticker with thousands separators.
type thousandsTicks struct{}

// Ticks implements plot.Ticker.
func (thousandsTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = thousands(int64(math.Round(ticks[i].Value)))
		}
	}
	return ticks
}

// renderSVG draws p as an SVG document of size w × h.
func renderSVG(p *plot.Plot, w, h vg.Length) ([]byte, error) {
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	c := vgsvg.New(w, h)
	// A margin, so that no label touches the edge of the image.
	p.Draw(draw.Crop(draw.New(c), vg.Points(14), -vg.Points(8), vg.Points(4), -vg.Points(4)))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("write svg: %w", err)
	}
	return buf.Bytes(), nil
}

// chartText makes a name safe for an SVG text element: gonum escapes
// markup, but characters XML forbids (controls) must not reach it; long
// names are cut.
func chartText(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == unicode.ReplacementChar || !unicode.IsPrint(r) && r != ' ' {
			return '?'
		}
		return r
	}, s)
	if r := []rune(s); len(r) > 48 {
		s = string(r[:47]) + "…"
	}
	return s
}

// thousands formats n with comma separators: 31262 → "31,262".
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// shortDuration formats d for a chart label.
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	default:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
}
