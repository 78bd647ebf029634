package soak

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Report is what a soak run measured and found.
type Report struct {
	Config     Config
	Samples    int
	FaultStart time.Time
	FaultEnd   time.Time

	Posted, Accepted, Refused, GaveUp int
	// Unposted are the events the load's time (Duration + Settle) ran
	// out for before a client took them: never sent, so never accepted.
	Unposted int
	// AcceptedUnseen are runs of events whose accepting answer the client
	// never got (a timeout, a killed replica); its retry then got 200.
	AcceptedUnseen int
	Runs           int
	Status         map[string]int
	Retries        int
	NetErrors      int
	Statuses       map[int]int
	Faults         map[string]int
	// Crashes are exits on their own (not by the schedule) per role, and
	// the last line the last of them wrote.
	Crashes       map[string]int
	CrashWhy      map[string]string
	SettledIn     time.Duration
	DupSteps      int
	Deliveries    int
	HooksReceived int
	HooksRepeated int
	Objects       int
	Replayed      int
	// Workflows counts the runs' Compaction executions by status.
	Workflows map[string]int
	// Quiet and End are the largest RSS per role (KB) after the warm-up
	// and after the checks; QuietHeap and EndHeap the largest live heap
	// (KB) at the same times.
	Quiet, End         map[string]int64
	QuietHeap, EndHeap map[string]int64

	latFault, latQuiet, toFinal []time.Duration
	// drains are each tenant's backlog after the faults: its runs that
	// became final after the faults stopped.
	drains map[string]*drain

	// Failures are the checks that did not hold; empty means the soak
	// passed.
	Failures []string
}

func pct(d []time.Duration, p float64) string {
	if len(d) == 0 {
		return "–"
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p * float64(len(s)-1))
	return s[i].Round(time.Millisecond).String()
}

// drain is one tenant's backlog at the faults' end, as it went: how many
// runs became final after the faults stopped, the first and the last of
// them (from the faults' end). A first run long after the end is slots
// held by runs stuck on the faults; a long last one is the backlog's size
// at the tenant's pace.
type drain struct {
	runs        int
	first, last time.Duration
}

func (d *drain) add(after time.Duration) {
	if d.runs == 0 || after < d.first {
		d.first = after
	}
	d.last = max(d.last, after)
	d.runs++
}

// drainOf is tenant's drain, made when new.
func (r *Report) drainOf(tenant string) *drain {
	if r.drains == nil {
		r.drains = map[string]*drain{}
	}
	d, ok := r.drains[tenant]
	if !ok {
		d = &drain{}
		r.drains[tenant] = d
	}
	return d
}

// drainText says each tenant's drain in one line.
func (r *Report) drainText() string {
	if len(r.drains) == 0 {
		return "–"
	}
	tenants := make([]string, 0, len(r.drains))
	for t := range r.drains {
		tenants = append(tenants, t)
	}
	sort.Strings(tenants)
	parts := make([]string, 0, len(tenants))
	for _, t := range tenants {
		d := r.drains[t]
		rate := 0.0
		if d.last > 0 {
			rate = float64(d.runs) / d.last.Seconds()
		}
		parts = append(parts, fmt.Sprintf("%s: %d runs, first final after %s, last after %s (%.1f runs/s)", t, d.runs,
			d.first.Round(100*time.Millisecond), d.last.Round(time.Second), rate))
	}
	return strings.Join(parts, "; ")
}

// Table writes the report as a Markdown table with the findings after it.
func (r *Report) Table(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "### Chaos soak, %s\n\n", r.FaultStart.UTC().Format("2006-01-02 15:04 UTC"))
	inFlight := ""
	if c.RunsInFlight > 0 {
		inFlight = fmt.Sprintf(" -runs-in-flight %d", c.RunsInFlight)
	}
	fmt.Fprintf(w, "`go run ./cmd/soak -events %d -sessions %d -tenants %d -workers %d -duration %s -fault-rate %g%s` (%d conversations × formats from %s)\n\n",
		c.Events, c.Sessions, c.Tenants, c.Workers, c.Duration, c.FaultRate, inFlight, r.Samples, c.DataDir)
	row := func(k, v string) { fmt.Fprintf(w, "| %s | %s |\n", k, v) }
	fmt.Fprintln(w, "| measure | value |")
	fmt.Fprintln(w, "|---|---|")
	row("events posted (valid + invalid)", fmt.Sprintf("%d (%d accepted, %d refused 4xx, %d given up); %d not posted (the load's time ran out)", r.Posted, r.Accepted, r.Refused, r.GaveUp, r.Unposted))
	row("runs", fmt.Sprintf("%d (%s)", r.Runs, countMap(r.Status)))
	row("runs of events whose 2xx the client never saw", fmt.Sprint(r.AcceptedUnseen))
	row("faults injected", countMap(r.Faults))
	row("processes that exited on their own (restarted by the soak's supervisor)", countMap(r.Crashes))
	row("client retries (same event id)", fmt.Sprintf("%d (%d network errors/timeouts)", r.Retries, r.NetErrors))
	row("HTTP answers", statusMap(r.Statuses))
	row("submit latency outside faults p50 / p99", fmt.Sprintf("%s / %s (%d events)", pct(r.latQuiet, .5), pct(r.latQuiet, .99), len(r.latQuiet)))
	row("submit latency during faults p50 / p99", fmt.Sprintf("%s / %s (%d events)", pct(r.latFault, .5), pct(r.latFault, .99), len(r.latFault)))
	row("event to final run p50 / p99", fmt.Sprintf("%s / %s", pct(r.toFinal, .5), pct(r.toFinal, .99)))
	row("every run final, after the faults stopped, within", r.SettledIn.Round(time.Second).String())
	row("each tenant's backlog after the faults (runs final after they stopped)", r.drainText())
	row("duplicate step rows / duplicate deliveries", fmt.Sprintf("%d / 0 of %d (receiver saw %d ids, %d more than once)", r.DupSteps, r.Deliveries, r.HooksReceived, r.HooksRepeated))
	row("S3 objects verified (SHA-256)", fmt.Sprint(r.Objects))
	row("histories replayed; Compaction workflows by status", fmt.Sprintf("%d; %s", r.Replayed, countMap(r.Workflows)))
	row("RSS quiet → end (MB)", fmt.Sprintf("worker %d → %d, API %d → %d", r.Quiet["worker"]>>10, r.End["worker"]>>10, r.Quiet["api"]>>10, r.End["api"]>>10))
	row("live heap quiet → end (MB)", fmt.Sprintf("worker %d → %d, API %d → %d", r.QuietHeap["worker"]>>10, r.EndHeap["worker"]>>10, r.QuietHeap["api"]>>10, r.EndHeap["api"]>>10))
	fmt.Fprintln(w)
	for _, role := range sortedKeys(r.CrashWhy) {
		fmt.Fprintf(w, "Last exit of a %s on its own: `%s`\n\n", role, truncate(r.CrashWhy[role], 300))
	}
	if len(r.Failures) == 0 {
		fmt.Fprintln(w, "Every check held.")
	} else {
		fmt.Fprintf(w, "%d checks failed:\n\n", len(r.Failures))
		for _, g := range groupFailures(r.Failures) {
			if g.n == 1 {
				fmt.Fprintf(w, "- %s\n", g.first)
			} else {
				fmt.Fprintf(w, "- %d × %s (the first)\n", g.n, g.first)
			}
		}
	}
	fmt.Fprintln(w)
}

// failureGroup is failures that differ only in their ids and figures.
type failureGroup struct {
	first string
	n     int
}

// failureShape is a failure's text with its ids and figures blanked:
// "replay of run run-1a2b: not found" and "replay of run run-9f8e: not
// found" have one shape.
var failureShape = regexp.MustCompile(`[0-9a-f]*[0-9][0-9a-f]*`)

// groupFailures groups failures of one shape, in the order each shape
// first failed, so that a long list (a backlog seen by several checks)
// still names every kind of failure once.
func groupFailures(failures []string) []failureGroup {
	var groups []failureGroup
	at := map[string]int{}
	for _, f := range failures {
		shape := failureShape.ReplaceAllString(f, "#")
		i, ok := at[shape]
		if !ok {
			i = len(groups)
			at[shape] = i
			groups = append(groups, failureGroup{first: f})
		}
		groups[i].n++
	}
	return groups
}

func sortedKeys[V any](m map[string]V) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func countMap(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func statusMap(m map[int]int) string {
	s := map[string]int{}
	for k, v := range m {
		s[fmt.Sprint(k)] = v
	}
	return countMap(s)
}
