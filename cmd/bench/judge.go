package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/ctxcompact/orchestrator/internal/config"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/testkit/probe"
)

// probeJudge is measurement 8's LLM-judge mode: an agent that sees only
// the compacted conversation answers the probe questions, and a grader
// scores each answer 0–5 against the reference from the original (the
// versioned prompts probe-answer and probe-grade). It runs when an
// OpenAI-compatible endpoint is configured (OPENAI_BASE_URL).
type probeJudge struct {
	sum   llm.Summarizer
	model string

	mu      sync.Mutex
	results []judgeResult
}

// judgeResult is one graded run, as stored in the -judge-out file.
type judgeResult struct {
	Preset   string             `json:"preset"`
	File     string             `json:"file"`
	Format   string             `json:"format"`
	Model    string             `json:"model"`
	Prompts  []string           `json:"prompts"`
	Scores   []int              `json:"scores"`
	Category map[string]float64 `json:"by_category"`
	Error    string             `json:"error,omitempty"`
}

// newProbeJudge is the judge of the configured endpoint, or nil offline.
func newProbeJudge(cfg config.Config) (*probeJudge, error) {
	if cfg.OpenAIBaseURL == "" {
		return nil, nil
	}
	sum, err := llm.NewOpenAI(llm.Config{BaseURL: cfg.OpenAIBaseURL, APIKey: cfg.OpenAIAPIKey, Model: cfg.SummarizerModel, Timeout: cfg.LLMTimeout})
	if err != nil {
		return nil, fmt.Errorf("probe judge: %w", err)
	}
	return &probeJudge{sum: sum, model: cfg.SummarizerModel}, nil
}

// grade asks and grades one output's probe questions.
func (j *probeJudge) grade(ctx context.Context, set probe.Set, out conversation.Conversation) (judgeResult, error) {
	qs := probe.Questions(set)
	r := judgeResult{Model: j.model}
	if len(qs) == 0 {
		return r, fmt.Errorf("no probe to ask")
	}
	seen := plan.Transcript(out, len(out.Messages), nil)
	ans, err := j.sum.Summarize(ctx, llm.Request{Prompt: llm.PromptProbeAnswer, Text: seen, Context: probe.Prompt(qs, false), TargetTokens: 1000})
	if err != nil {
		return r, fmt.Errorf("answer the probes: %w", err)
	}
	grade, err := j.sum.Summarize(ctx, llm.Request{Prompt: llm.PromptProbeGrade, Text: ans.Text, Context: probe.Prompt(qs, true), TargetTokens: 200})
	if err != nil {
		return r, fmt.Errorf("grade the answers: %w", err)
	}
	r.Prompts = []string{ans.PromptVersion, grade.PromptVersion}
	if r.Scores, err = probe.ParseGrades(grade.Text, len(qs)); err != nil {
		return r, fmt.Errorf("read the grades: %w", err)
	}
	r.Category = probe.ByCategory(qs, r.Scores)
	return r, nil
}

// record keeps one result for the report and the file.
func (j *probeJudge) record(r judgeResult) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.results = append(j.results, r)
}

// byPreset averages each category over a preset's graded runs.
func (j *probeJudge) byPreset(preset string) (map[string]float64, int, int) {
	sum, n := map[string]float64{}, map[string]float64{}
	graded, failed := 0, 0
	for _, r := range j.results {
		if r.Preset != preset {
			continue
		}
		if r.Error != "" {
			failed++
			continue
		}
		graded++
		for c, v := range r.Category {
			sum[c] += v
			n[c]++
		}
	}
	out := map[string]float64{}
	for c := range sum {
		out[c] = sum[c] / n[c]
	}
	return out, graded, failed
}

// summary is a preset's scores as a table cell.
func (j *probeJudge) summary(preset string) string {
	cats, graded, failed := j.byPreset(preset)
	names := make([]string, 0, len(cats))
	for c := range cats {
		names = append(names, c)
	}
	sort.Strings(names)
	var parts []string
	for _, c := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f", c, cats[c]))
	}
	s := fmt.Sprintf("LLM judge (0–5, %d runs): %s", graded, strings.Join(parts, ", "))
	if failed > 0 {
		s += fmt.Sprintf("; %d ungraded", failed)
	}
	return s
}

// write stores every graded run as JSON.
func (j *probeJudge) write(path string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	data, err := json.MarshalIndent(j.results, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
