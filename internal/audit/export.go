package audit

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// Export formats.
const (
	FormatJSONL = "jsonl"
	FormatCSV   = "csv"
)

// CSVHeader is the header row of a CSV export: RunRecord's fields but the
// free-form stats.
var CSVHeader = []string{
	"id", "tenant", "session", "event_id", "trigger", "preset", "model", "prompt_version", "status", "level",
	"tokens_before", "tokens_after", "chars_before", "chars_after", "ratio", "duration_ms",
	"started_at", "finished_at", "error", "replay_of",
	"input_key", "archive_key", "archive_sha256", "output_key", "output_sha256",
	"session_state", "promoted", "repaired_by",
	// Appended later; the columns above keep their order.
	"degraded", "degraded_reasons",
	"cost.summarizer_usd", "cost.cache_rewrite_tokens", "cost.tokens_shed", "cost.net_saving_usd", "cost.turns",
	"cache.prefix_tokens", "cache.rewrite_tokens", "cache.prefix_share",
	"session_log.blocks", "session_log.tokens", "session_log.appended", "session_log.reflected",
	"error_class", "error_cause",
}

// ExportRun is a run's line of an export: its RunRecord, and whether it
// is its session's state. A replay is a what-if (SessionState false)
// unless it was promoted; a run a promoted replay repaired is no longer
// the session's state either (RepairedBy names the replay), so that a
// reader adding up an export counts each repair once, as the status
// report and the web UI do (store.RunPromotions).
type ExportRun struct {
	RunRecord
	SessionState bool   `json:"session_state"`
	Promoted     bool   `json:"promoted,omitempty"`
	RepairedBy   string `json:"repaired_by,omitempty"`
}

// NewExportRun is r's export line, given the promotions that concern it.
func NewExportRun(r store.Run, ps store.RunPromotions) ExportRun {
	return ExportRun{RunRecord: NewRunRecord(r), SessionState: ps.SessionState(r), Promoted: ps.Promoted(r.ID),
		RepairedBy: ps.RepairedBy[r.ID].RunID}
}

// ExportStep is a step line of a JSON lines export with steps: it follows
// its run's line, and Record ("step") tells it from a run's line, which
// has no "record" key.
type ExportStep struct {
	Record string `json:"record"`
	RunID  string `json:"run_id"`
	StepRecord
}

// Export writes the tenant's runs matching f, newest first, as JSON lines
// (one ExportRun per line, stats included) or CSV (CSVHeader, then one row
// per run). It pages through every match; f.Limit, when set, caps the
// rows, and f.AfterID starts after that run.
//
// With steps (JSON lines only), each run's line is followed by one
// ExportStep line per step the run recorded, attempts and failures
// included, oldest first.
func (s *Service) Export(ctx context.Context, tenant string, f store.RunFilter, format string, steps bool, w io.Writer) error {
	if err := blob.ValidateTenant(tenant); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if format != FormatJSONL && format != FormatCSV {
		return fmt.Errorf("export: format %q is not one of jsonl, csv", format)
	}
	if f.Limit < 0 {
		return fmt.Errorf("export: negative limit %d", f.Limit)
	}
	if steps && format != FormatJSONL {
		return fmt.Errorf("export: steps are exported with format jsonl only, not %s", format)
	}
	f.Tenant = tenant
	if f.AfterID != "" {
		if _, err := s.run(ctx, tenant, f.AfterID); err != nil {
			return fmt.Errorf("export: cursor: %w", err)
		}
	}
	// Rows are written page by page, so an export of a long history never
	// holds it all in memory.
	var enc *json.Encoder
	var cw *csv.Writer
	if format == FormatJSONL {
		enc = json.NewEncoder(w)
	} else {
		cw = csv.NewWriter(w)
		if err := cw.Write(CSVHeader); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	total := f.Limit
	written := 0
	for {
		f.Limit = store.MaxListLimit
		if total > 0 {
			f.Limit = min(f.Limit, total-written)
		}
		page, err := s.Store.ListRuns(ctx, f)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		ids := make([]string, len(page))
		for i, r := range page {
			ids[i] = r.ID
		}
		promotions, err := s.Store.PromotionsOf(ctx, tenant, ids)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		for _, r := range page {
			rec := NewExportRun(r, promotions)
			if enc != nil {
				err = enc.Encode(rec)
				if err == nil && steps {
					err = s.exportSteps(ctx, enc, r.ID)
				}
			} else {
				err = cw.Write(csvRow(rec))
			}
			if err != nil {
				return fmt.Errorf("export run %s: %w", r.ID, err)
			}
		}
		written += len(page)
		if cw != nil {
			cw.Flush()
			if err := cw.Error(); err != nil {
				return fmt.Errorf("export: %w", err)
			}
		}
		if len(page) < f.Limit || (total > 0 && written >= total) {
			return nil
		}
		f.AfterID = page[len(page)-1].ID
	}
}

// exportSteps writes run runID's steps as ExportStep lines.
func (s *Service) exportSteps(ctx context.Context, enc *json.Encoder, runID string) error {
	steps, err := s.Store.ListSteps(ctx, runID)
	if err != nil {
		return err
	}
	for _, st := range steps {
		if err := enc.Encode(ExportStep{Record: "step", RunID: runID, StepRecord: newStepRecord(st)}); err != nil {
			return err
		}
	}
	return nil
}

func csvRow(r ExportRun) []string {
	finished := ""
	if r.FinishedAt != nil {
		finished = r.FinishedAt.Format(time.RFC3339Nano)
	}
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	t := cell
	row := []string{
		t(r.ID), t(r.Tenant), t(r.Session), t(r.EventID), t(r.Trigger), t(r.Preset), t(r.Model), t(r.PromptVersion), t(r.Status), t(r.Level),
		i(r.TokensBefore), i(r.TokensAfter), i(r.CharsBefore), i(r.CharsAfter),
		strconv.FormatFloat(r.Ratio, 'f', -1, 64), i(r.DurationMS),
		r.StartedAt.Format(time.RFC3339Nano), finished, t(r.Error), t(r.ReplayOf),
		t(r.InputKey), t(r.ArchiveKey), t(r.ArchiveSHA256), t(r.OutputKey), t(r.OutputSHA256),
		strconv.FormatBool(r.SessionState), strconv.FormatBool(r.Promoted), t(r.RepairedBy),
	}
	row = append(row, strconv.FormatBool(r.Degraded), t(strings.Join(r.DegradedReasons, "; ")))
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	// A figure the run did not record is an empty cell, not a zero.
	if c := r.stats.Cost; c != nil {
		row = append(row, f(c.SummarizerUSD), i(int64(c.CacheRewriteTokens)), i(int64(c.TokensShed)), f(c.NetSavingUSD), i(int64(c.Turns)))
	} else {
		row = append(row, "", "", "", "", "")
	}
	if c := r.stats.Cache; c != nil {
		row = append(row, i(int64(c.PrefixTokens)), i(int64(c.RewriteTokens)), f(c.PrefixShare))
	} else {
		row = append(row, "", "", "")
	}
	if l := r.stats.SessionLog; l != nil {
		row = append(row, i(int64(l.Blocks)), i(int64(l.Tokens)), i(int64(l.Appended)), strconv.FormatBool(l.Reflected))
	} else {
		row = append(row, "", "", "", "")
	}
	row = append(row, t(r.ErrorClass), t(r.ErrorCause))
	return row
}

// cell neutralises a text cell for spreadsheets (OWASP CSV injection): a
// value starting with =, +, -, @, a tab or a carriage return would be read
// as a formula, so it gets a leading apostrophe. Numbers are written by
// csvRow itself and are not passed through here.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
