package webui

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"math"
	"regexp"
	"strings"
	"time"
	"unicode"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/strategy"
)

// band is one of the three-tier status levels as a range of context usage, in
// percent of the limit. The bounds are strategy.LevelFor's (a test keeps
// the two in step).
type band struct {
	Level    strategy.Level
	From, To float64 // percent; To of the last band is open
	Color    color.Color
}

// levelBands are the GREEN…CRITICAL bands, lowest first.
var levelBands = []band{
	{strategy.LevelGreen, 0, 25, color.NRGBA{R: 0x2e, G: 0xa0, B: 0x43, A: 0x38}},
	{strategy.LevelYellow, 25, 50, color.NRGBA{R: 0xe6, G: 0xc2, B: 0x00, A: 0x40}},
	{strategy.LevelOrange, 50, 75, color.NRGBA{R: 0xf0, G: 0x88, B: 0x1a, A: 0x40}},
	{strategy.LevelRed, 75, 85, color.NRGBA{R: 0xd7, G: 0x30, B: 0x27, A: 0x40}},
	{strategy.LevelCritical, 85, math.Inf(1), color.NRGBA{R: 0x80, G: 0x00, B: 0x26, A: 0x48}},
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
	colorReplay  = color.NRGBA{R: 0x7c, G: 0x3a, B: 0xed, A: 0xff}
)

// Font sizes of the charts, in points.
const (
	titleFontSize  = 12
	axisFontSize   = 11
	tickFontSize   = 9.5
	legendFontSize = 9
)

// sans is Liberation Sans at size points. gonum's default is Liberation
// Serif; renderSVG also names the browser's sans-serif fonts after it,
// since the SVG names the font and the browser may not have it.
func sans(size float64) font.Font {
	return font.Font{Typeface: "Liberation", Variant: "Sans", Size: vg.Points(size)}
}

// newPlot is plot.New with every text of the plot in sans-serif.
func newPlot() *plot.Plot {
	p := plot.New()
	p.Title.TextStyle.Font = sans(titleFontSize)
	p.Title.Padding = vg.Points(6)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = sans(axisFontSize)
		a.Tick.Label.Font = sans(tickFontSize)
	}
	p.Legend.TextStyle.Font = sans(legendFontSize)
	p.Legend.Padding = vg.Points(4)
	p.Legend.ThumbnailWidth = vg.Points(16)
	return p
}

// newLabels is plotter.NewLabels in sans-serif at size points.
func newLabels(at plotter.XYs, texts []string, size float64) (*plotter.Labels, error) {
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: at, Labels: texts})
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Font = sans(size)
	}
	return l, nil
}

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
	// Replay is set for a what-if replay of an earlier run: it is drawn
	// apart and does not join the session's size from run to run, since
	// a replay changes nothing in the session.
	Replay bool
	// Promoted is set for a promoted replay: the session's state, drawn
	// on the session's line like any run, its tick saying it is one.
	Promoted bool
}

// usage is size as a percentage of limit.
func usage(size, limit int64) float64 {
	if limit <= 0 {
		return 0
	}
	return float64(size) / float64(limit) * 100
}

// Layout estimates used to thin labels before gonum lays the plot out:
// the data area's width and height in points (the image less the axes,
// the title and the legend column) and the width of a character in
// points per point of font size. They err on the wide side, since the
// browser may draw the text in a wider sans-serif than Liberation Sans.
const (
	estDataWidth  = 470.0
	estDataHeight = 220.0
	estCharWidth  = 0.64
)

// textWidth estimates the width in points of s in a font of size points.
func textWidth(s string, size float64) float64 {
	return float64(len([]rune(s))) * size * estCharWidth
}

// timelineSVG draws a session's token timeline: each run's size before
// and after, as a percentage of its context limit, over the level bands,
// with the limit at 100%. What-if replays are drawn as purple triangles,
// dashed, apart from the session's line; a promoted replay is on it. Points are labelled with their sizes,
// every point while the labels fit side by side, else every few points
// (and always the newest), so that no two labels overlap.
func timelineSVG(points []timelinePoint) ([]byte, error) {
	p := newPlot()
	p.Title.Text = "Context usage before and after each run"
	p.X.Label.Text = "run"
	p.Y.Label.Text = "% of the context limit"

	xmin, xmax := 0.5, float64(max(len(points), 1))+0.5
	ymax := 110.0
	for _, pt := range points {
		ymax = math.Max(ymax, usage(pt.Before, pt.Limit)*1.12)
	}
	p.X.Min, p.X.Max = xmin, xmax
	p.Y.Min, p.Y.Max = 0, ymax

	bands := make([]*plotter.Polygon, len(levelBands))
	for i, b := range levelBands {
		top := math.Min(b.To, ymax)
		poly, err := plotter.NewPolygon(plotter.XYs{{X: xmin, Y: b.From}, {X: xmax, Y: b.From}, {X: xmax, Y: top}, {X: xmin, Y: top}})
		if err != nil {
			return nil, fmt.Errorf("timeline band %s: %w", b.Level, err)
		}
		poly.Color = b.Color
		poly.LineStyle.Width = 0
		p.Add(poly)
		bands[i] = poly
	}

	limit, err := plotter.NewLine(plotter.XYs{{X: xmin, Y: 100}, {X: xmax, Y: 100}})
	if err != nil {
		return nil, fmt.Errorf("timeline limit: %w", err)
	}
	limit.Color = colorLimit
	limit.Width = vg.Points(1)
	limit.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	p.Add(limit)

	var ticks []string
	if len(points) > 0 {
		if err := addTimelinePoints(p, points, ymax); err != nil {
			return nil, err
		}
		for _, pt := range points {
			tick := fmt.Sprintf("#%d", pt.N)
			switch {
			case pt.Replay:
				tick += " replay"
			case pt.Promoted:
				tick += " promoted"
			}
			ticks = append(ticks, tick)
		}
	}
	p.X.Tick.Marker = indexTicks(ticks)
	p.Legend.Add("limit (100%)", limit)
	// The bands top down, as on the plot.
	for i := len(levelBands) - 1; i >= 0; i-- {
		p.Legend.Add(string(levelBands[i].Level), bands[i])
	}
	return renderSVG(p, 10*vg.Inch, 4.2*vg.Inch)
}

// addTimelinePoints draws the runs of the timeline: a line from each
// run's size before to its size after, the session's size after each run
// (replays left out) and the labels.
func addTimelinePoints(p *plot.Plot, points []timelinePoint, ymax float64) error {
	var before, after, replayAfter, session plotter.XYs
	for i, pt := range points {
		b := plotter.XY{X: float64(i + 1), Y: usage(pt.Before, pt.Limit)}
		a := plotter.XY{X: float64(i + 1), Y: usage(pt.After, pt.Limit)}
		seg, err := plotter.NewLine(plotter.XYs{b, a})
		if err != nil {
			return fmt.Errorf("timeline run %d: %w", pt.N, err)
		}
		seg.Color = colorConnect
		seg.Width = vg.Points(1.5)
		if pt.Replay {
			seg.Color = colorReplay
			seg.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
		}
		p.Add(seg)
		before = append(before, b)
		if pt.Replay {
			replayAfter = append(replayAfter, a)
		} else {
			after = append(after, a)
			session = append(session, a)
		}
	}
	// The session's size after each run, run to run.
	if len(session) > 1 {
		trend, err := plotter.NewLine(session)
		if err != nil {
			return fmt.Errorf("timeline trend: %w", err)
		}
		trend.Color = colorAfter
		trend.Width = vg.Points(0.75)
		trend.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(trend)
	}
	sb, err := plotter.NewScatter(before)
	if err != nil {
		return fmt.Errorf("timeline before: %w", err)
	}
	sb.GlyphStyle = draw.GlyphStyle{Color: colorBefore, Radius: vg.Points(3.5), Shape: draw.CircleGlyph{}}
	p.Add(sb)
	p.Legend.Add("before", sb)
	if len(after) > 0 {
		sa, err := plotter.NewScatter(after)
		if err != nil {
			return fmt.Errorf("timeline after: %w", err)
		}
		sa.GlyphStyle = draw.GlyphStyle{Color: colorAfter, Radius: vg.Points(3.5), Shape: draw.CircleGlyph{}}
		p.Add(sa)
		p.Legend.Add("after", sa)
	}
	if len(replayAfter) > 0 {
		sr, err := plotter.NewScatter(replayAfter)
		if err != nil {
			return fmt.Errorf("timeline replays: %w", err)
		}
		sr.GlyphStyle = draw.GlyphStyle{Color: colorReplay, Radius: vg.Points(4), Shape: draw.PyramidGlyph{}}
		p.Add(sr)
		p.Legend.Add("replay (what-if)", sr)
	}

	// Labels: the size before above its point, the size after below
	// its point, or both in one label right of the line when the two
	// points are too close to label apart. Every point is labelled while
	// the widest label fits before the next point, else every few points
	// (always the newest).
	type pointLabels struct {
		above, below, beside string
	}
	labelsOf := make([]pointLabels, len(points))
	widest := 0.0
	for i, pt := range points {
		level := pt.Level
		if level == "" {
			level = string(strategy.LevelFor(usage(pt.After, pt.Limit) / 100))
		}
		afterText := thousands(pt.After) + " " + level
		yb, ya := usage(pt.Before, pt.Limit), usage(pt.After, pt.Limit)
		if (yb-ya)/ymax*estDataHeight < 12 {
			labelsOf[i] = pointLabels{beside: thousands(pt.Before) + " → " + afterText}
		} else {
			labelsOf[i] = pointLabels{above: thousands(pt.Before), below: afterText}
		}
		for _, text := range []string{labelsOf[i].above, labelsOf[i].below, labelsOf[i].beside} {
			widest = math.Max(widest, textWidth(text, 8))
		}
	}
	every := max(1, int(math.Ceil((widest+14)/(estDataWidth/float64(len(points))))))
	var aboveAt, belowAt, besideAt plotter.XYs
	var above, below, beside []string
	for i, pt := range points {
		if (len(points)-1-i)%every != 0 {
			continue
		}
		x := float64(i + 1)
		yb, ya := usage(pt.Before, pt.Limit), usage(pt.After, pt.Limit)
		if l := labelsOf[i]; l.beside != "" {
			besideAt = append(besideAt, plotter.XY{X: x, Y: (yb + ya) / 2})
			beside = append(beside, l.beside)
		} else {
			aboveAt = append(aboveAt, plotter.XY{X: x, Y: yb})
			above = append(above, l.above)
			belowAt = append(belowAt, plotter.XY{X: x, Y: ya})
			below = append(below, l.below)
		}
	}
	for _, l := range []struct {
		at     plotter.XYs
		texts  []string
		yalign draw.YAlignment
		offset vg.Point
	}{
		{aboveAt, above, draw.YBottom, vg.Point{X: vg.Points(2), Y: vg.Points(5)}},
		{belowAt, below, draw.YTop, vg.Point{X: vg.Points(2), Y: -vg.Points(5)}},
		{besideAt, beside, draw.YCenter, vg.Point{X: vg.Points(7)}},
	} {
		if len(l.at) == 0 {
			continue
		}
		labels, err := newLabels(l.at, l.texts, 8)
		if err != nil {
			return fmt.Errorf("timeline labels: %w", err)
		}
		for i := range labels.TextStyle {
			labels.TextStyle[i].XAlign = draw.XLeft
			labels.TextStyle[i].YAlign = l.yalign
		}
		labels.Offset = l.offset
		p.Add(labels)
	}
	return nil
}

// indexTicks labels the integer positions 1..len(names) with names,
// every few positions when the names would not fit side by side.
func indexTicks(names []string) plot.Ticker {
	return plot.TickerFunc(func(_, _ float64) []plot.Tick {
		ticks := make([]plot.Tick, 0, len(names))
		widest := 0.0
		for _, n := range names {
			widest = math.Max(widest, textWidth(n, tickFontSize))
		}
		every := max(1, int(math.Ceil((widest+10)/(estDataWidth/float64(max(len(names), 1))))))
		for i, n := range names {
			label := n
			if (len(names)-1-i)%every != 0 {
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
	p := newPlot()
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
	lab, err := newLabels(ends, labels, 7.5)
	if err != nil {
		return nil, fmt.Errorf("steps labels: %w", err)
	}
	for i := range lab.TextStyle {
		lab.TextStyle[i].YAlign = draw.YCenter
	}
	lab.Offset = vg.Point{X: vg.Points(4)}
	p.Add(lab)
	p.Legend.Add("attempt", ok)
	p.Legend.Add("failed attempt", failed)
	p.NominalY(names...)
	// Room for the last label.
	_, xmax, _, _ := lab.DataRange()
	p.X.Max = math.Max(xmax*1.15, 0.01)
	return renderSVG(p, 10*vg.Inch, height)
}

// dailyRunsSVG draws the runs of each day, stacked by outcome.
func dailyRunsSVG(days []store.DailyRuns) ([]byte, error) {
	p := newPlot()
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
		{"live", colorOther, func(d store.DailyRuns) int { return d.Live }},
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
	p.Y.Min = 0
	p.Y.Max = math.Max(p.Y.Max*1.05, 1)
	p.NominalX(dayNames(days)...)
	return renderSVG(p, 10*vg.Inch, 3.4*vg.Inch)
}

// tokensSavedSVG draws the tokens saved each day.
func tokensSavedSVG(days []store.DailyRuns) ([]byte, error) {
	p := newPlot()
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
// overlap: the newest day is always labelled.
func dayNames(days []store.DailyRuns) []string {
	names := make([]string, len(days))
	slot := estDataWidth / float64(max(len(days), 1))
	every := max(1, int(math.Ceil((textWidth("00-00", tickFontSize)+12)/slot)))
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

// Marks of the chart's areas: invisible rectangles that name where the
// data and the legend are drawn, so that a browser test (and anyone
// reading the SVG) can check that the legend stays beside the data.
const (
	plotAreaID   = "plot-area"
	legendAreaID = "legend-area"
)

// legendGap separates the data area from the legend column.
const legendGap = 18

// Fonts the SVG asks for: Liberation Sans, as measured, then its
// metric-compatible cousins, then any sans-serif.
const svgSansFamily = "font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"

// svgSize is the size vgsvg gives the root element.
var svgSize = regexp.MustCompile(`<svg width="[^"]*" height="[^"]*"`)

// renderSVG draws p as an SVG document of w × h points that scales to
// the width of its container. The legend goes in a column to the right
// of the data, never over it; an empty legend takes no room.
func renderSVG(p *plot.Plot, w, h vg.Length) ([]byte, error) {
	legend := p.Legend
	legend.Top, legend.Left = true, true
	// The plot draws its own legend inside the data area: give it none.
	p.Legend = plot.NewLegend()

	c := vgsvg.New(w, h)
	// A margin, so that no label touches the edge of the image.
	area := draw.Crop(draw.New(c), vg.Points(14), -vg.Points(8), vg.Points(4), -vg.Points(4))
	plotArea := area
	var legendArea *draw.Canvas
	if lw := legend.Rectangle(area).Size().X; lw > 0 {
		// Room for text a little wider than measured: the browser may
		// draw it in another sans-serif than Liberation Sans.
		column := lw*1.4 + vg.Points(legendGap)
		plotArea = draw.Crop(area, 0, -column, 0, 0)
		data := p.DataCanvas(plotArea)
		legendArea = &draw.Canvas{Canvas: area.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: plotArea.Max.X + vg.Points(legendGap), Y: data.Min.Y},
			Max: vg.Point{X: area.Max.X, Y: data.Max.Y},
		}}
	}
	data := p.DataCanvas(plotArea)
	p.Draw(plotArea)
	if legendArea != nil {
		legend.Draw(*legendArea)
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("write svg: %w", err)
	}

	svg := buf.String()
	if !svgSize.MatchString(svg) {
		return nil, errors.New("write svg: no size on the svg element")
	}
	// The viewBox keeps the aspect ratio; the width follows the page.
	svg = svgSize.ReplaceAllLiteralString(svg, `<svg width="100%"`)
	svg = strings.ReplaceAll(svg, "font-family:Liberation Sans;", svgSansFamily)
	var marks strings.Builder
	writeArea(&marks, plotAreaID, data.Rectangle, h)
	if legendArea != nil {
		writeArea(&marks, legendAreaID, legendArea.Rectangle, h)
	}
	end := strings.LastIndex(svg, "</svg>")
	if end < 0 {
		return nil, errors.New("write svg: no closing svg element")
	}
	return []byte(svg[:end] + marks.String() + svg[end:]), nil
}

// writeArea writes an invisible rectangle named id over r, in the SVG's
// coordinates (origin at the top left; vg's is at the bottom left).
func writeArea(b *strings.Builder, id string, r vg.Rectangle, h vg.Length) {
	fmt.Fprintf(b, `<rect id="%s" x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="none" stroke="none"/>`+"\n",
		id, r.Min.X.Points(), (h - r.Max.Y).Points(), r.Size().X.Points(), r.Size().Y.Points())
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
