package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/drift"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// CheckDrift measures a summary against its source: the share of the
// source's identifiers (paths, URLs, ids, numbers, commands, error codes)
// it keeps, over the most recent MaxIdentifiers of them, and whether it
// invented anything. Both sides are compared normalised (drift.Comparable:
// escapes, heredoc markers, quoting), and what the product wrote itself
// (token counts of its reference blocks, recovery ids, its headings) is
// neither required nor invented: a check that fails every summary,
// the product's own repair included, is an alarm nobody reads. The
// missing items go to S3 and Postgres, never into workflow history.
func (a *Activities) CheckDrift(ctx context.Context, in DriftInput) (res DriftResult, err error) {
	rec := a.begin(ctx, in.Run, in.Step, "drift")
	defer rec.end(&err, &res.Recorded)

	p, err := a.preset(in.Run)
	if err != nil {
		return res, err
	}
	summary, err := a.text(ctx, in.Run.Tenant, in.SummaryKey)
	if err != nil {
		return res, err
	}
	source, err := a.text(ctx, in.Run.Tenant, in.SourceKey)
	if err != nil {
		return res, err
	}
	cs, err := a.checked(in.SourceKey, source)
	if err != nil {
		return res, err
	}
	score, missing := retention(cs.required, summary, p.Drift.MaxIdentifiers)
	idPassed := score >= p.Drift.MinRetention
	res = DriftResult{Score: score, Passed: idPassed}
	checks, missing := a.driftChecks(ctx, in, source, cs, summary, &res, missing)
	fab := checks[len(checks)-1]
	res.PatchOnly = !res.Passed && idPassed && onlyLastErrorsFailed(checks)
	// Only a failed check hands its missing items on (to the repair pass
	// and the patch); a passed one keeps them in its verdict rows alone,
	// without an S3 write.
	if len(missing) > 0 && !res.Passed {
		data, _ := json.Marshal(missing)
		if res.MissingKey, err = a.putText(ctx, in.Run, "drift", string(data)); err != nil {
			return res, err
		}
	}
	verdict := identifierVerdict(p.Drift.MinRetention, score, idPassed, fab.Passed, res.Passed, len(missing), len(fab.Missing))
	ident := store.Drift{RunID: in.Run.ID, Step: in.Step, Pass: in.Pass, Score: score,
		Passed: res.Passed, Missing: missing, Verdict: verdict}
	if err := a.recordDrift(ctx, in, ident, idPassed, checks); err != nil {
		return res, err
	}
	return res, nil
}

// driftChecks are the checks of a summary beyond its identifiers', their
// verdicts folded into res: the three-tier design's session checks and the
// last-errors check for a history summary, then for every summary the
// fabrication check, which comes last.
// missing is returned with what the session checks miss added.
//
// cs is what the checks of this source share (its comparable form, its
// open errors).
func (a *Activities) driftChecks(ctx context.Context, in DriftInput, source string, cs checkedSource, summary string, res *DriftResult, missing []string) ([]drift.Check, []string) {
	var checks []drift.Check
	if isHistoryStep(in.Step) {
		// The three-tier design's checks of a session summary: intent, trajectory,
		// premature completion, clarification. Each is stored; a failed
		// one fails the check, and what it misses goes to the repair
		// pass (DRIFT_DETECTED realignment) with the identifiers.
		checks = a.sessionChecks(ctx, in, source, summary)
		// The product's own check beside them, deterministic whoever
		// judged the rest: a summary by a model keeps the last errors the
		// tools reported that are still open, so that a session's blocks
		// carry them from one compaction to the next. The offline summary
		// keeps them by its own trimming order (offline), which gives them
		// up only when its budget cannot hold them beside the
		// identifiers.
		if !in.Offline {
			checks = append(checks, drift.LastErrorsCheck(cs.open.of(source), summary))
		}
		for _, c := range checks {
			res.Passed = res.Passed && c.Passed
			res.Score = min(res.Score, c.Score)
			missing = append(missing, c.Missing...)
		}
	}
	// Every summary, whoever judged the rest: nothing in it may be
	// invented. What it invented is stored in its verdict, not handed to
	// the repair pass or the patch as something to add.
	fab := drift.FabricationCheckComparable(cs.comparable, summary)
	checks = append(checks, fab)
	res.Passed = res.Passed && fab.Passed
	res.Score = min(res.Score, fab.Score)
	res.Fabricated = len(fab.Missing)
	res.MissingCount = len(missing)
	return checks, missing
}

// onlyLastErrorsFailed reports whether the one failed check of checks is
// the last-errors check.
func onlyLastErrorsFailed(checks []drift.Check) bool {
	failed := false
	for _, c := range checks {
		if c.Passed {
			continue
		}
		if c.Name != drift.CheckLastErrors {
			return false
		}
		failed = true
	}
	return failed
}

// identifierVerdict is the verdict row's text of a drift check: why it
// failed, led by the identifiers' share.
func identifierVerdict(minRetention, score float64, idPassed, fabPassed, passed bool, missing, fabricated int) string {
	switch {
	case !idPassed:
		return fmt.Sprintf("below %.2f: %d identifiers missing", minRetention, missing)
	case fabPassed && !passed:
		return fmt.Sprintf("identifiers kept (%.2f); a session check failed: %d items missing", score, missing)
	case !passed:
		return fmt.Sprintf("identifiers kept (%.2f); %d invented items (quotes, paths, ids not in the source)", score, fabricated)
	}
	return "passed"
}

// recordDrift records the identifier verdict and each other check's in
// one round trip, and counts them in the metrics.
func (a *Activities) recordDrift(ctx context.Context, in DriftInput, ident store.Drift, idPassed bool, checks []drift.Check) error {
	verdicts := []store.Drift{ident}
	a.Metrics.Drift("identifiers", idPassed)
	for _, c := range checks {
		a.Metrics.Drift(c.Name, c.Passed)
		verdict := "passed: " + c.Note
		if !c.Passed {
			verdict = "DRIFT_DETECTED: " + c.Note
		}
		verdicts = append(verdicts, store.Drift{RunID: in.Run.ID, Step: in.Step + "/" + c.Name, Pass: in.Pass,
			Score: c.Score, Passed: c.Passed, Missing: c.Missing, Verdict: verdict})
	}
	if err := a.Store.RecordDrift(ctx, verdicts...); err != nil {
		return storeErr(fmt.Errorf("record drift: %w", err))
	}
	return nil
}

// sessionChecks are the three-tier design's checks of a history summary: the LLM
// judge's verdict when the workflow got one, else (or when it is not in
// the schema) the deterministic heuristics. The note says which decided.
func (a *Activities) sessionChecks(ctx context.Context, in DriftInput, source, summary string) []drift.Check {
	fallback := ""
	if in.JudgeKey != "" {
		text, err := a.text(ctx, in.Run.Tenant, in.JudgeKey)
		if err == nil {
			verdict, perr := llm.ParseJudgeVerdict(text)
			if perr == nil {
				checks := make([]drift.Check, 0, len(verdict))
				for _, v := range verdict {
					score := 0.0
					if v.Passed {
						score = 1
					}
					checks = append(checks, drift.Check{Name: v.Name, Passed: v.Passed, Score: score,
						Missing: v.Missing, Note: "LLM judge: " + llm.Scrub(v.Note)})
				}
				return checks
			}
			err = perr
		}
		fallback = "LLM judge unusable (" + llm.Scrub(err.Error()) + "); heuristics: "
	}
	checks := drift.SessionChecks(source, summary)
	for i := range checks {
		checks[i].Note = fallback + checks[i].Note
	}
	return checks
}

// isHistoryStep reports whether a drift check is of a history summary
// (a session summary), not of one tool result.
func isHistoryStep(step string) bool {
	return strings.HasPrefix(step, "history/") || strings.HasPrefix(step, "budget/history/") || strings.HasPrefix(step, "handoff/")
}

// Retention scores a summary against the last maxIDs identifiers of its
// source a summary must keep (drift.Required) and lists the missing
// ones, most recent last.
func Retention(source, summary string, maxIDs int) (float64, []string) {
	return retention(drift.Required(drift.Identifiers(source), drift.Comparable(source)), summary, maxIDs)
}

func retention(ids []drift.Identifier, summary string, maxIDs int) (float64, []string) {
	if maxIDs > 0 && len(ids) > maxIDs {
		ids = ids[len(ids)-maxIDs:]
	}
	if len(ids) == 0 {
		return 1, nil
	}
	var missing []string
	for _, id := range drift.MissingComparable(ids, summary) {
		missing = append(missing, id.Value)
	}
	return float64(len(ids)-len(missing)) / float64(len(ids)), missing
}

// Patch appends the items still missing after repair to a summary, so that
// no identifier the drift check found is lost.
func (a *Activities) Patch(ctx context.Context, in PatchInput) (res SummarizeResult, err error) {
	rec := a.begin(ctx, in.Run, in.Step, "patch")
	defer rec.end(&err, &res.Recorded)

	summary, err := a.text(ctx, in.Run.Tenant, in.SummaryKey)
	if err != nil {
		return res, err
	}
	raw, err := a.text(ctx, in.Run.Tenant, in.MissingKey)
	if err != nil {
		return res, err
	}
	var missing []string
	if raw != "" {
		if err := json.Unmarshal([]byte(raw), &missing); err != nil {
			return res, fmt.Errorf("read missing items: %w", err)
		}
	}
	var sb strings.Builder
	sb.WriteString(strings.TrimRight(summary, "\n"))
	if len(missing) > 0 {
		sb.WriteString("\n\nIdentifiers kept by the drift check:\n")
		for _, m := range missing {
			sb.WriteString("- " + m + "\n")
		}
	}
	out := sb.String()
	key, err := a.putText(ctx, in.Run, "summary", out)
	if err != nil {
		return res, err
	}
	rec.outputSize = int64(len(out))
	return SummarizeResult{Key: key, Chars: utf8.RuneCountInString(out), Fallback: "patch"}, nil
}
