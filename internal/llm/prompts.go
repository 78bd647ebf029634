package llm

import (
	"embed"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"text/template"
)

// The prompt names. Each names a file prompts/<name>.md.
const (
	// PromptChunk summarizes one chunk of a large tool result (react-two-layer,
	// layer 1).
	PromptChunk = "chunk"
	// PromptMerge is the second-level pass over combined chunk summaries
	// (react-two-layer, layer 1).
	PromptMerge = "merge"
	// PromptResult compresses one tool result with the turn's thought and
	// action as context (react-two-layer, layer 2).
	PromptResult = "result"
	// PromptHistory is the offload-compact 8-section history summary.
	PromptHistory = "history"
	// PromptBrief is the auto-summarize short conversation summary.
	PromptBrief = "brief"
	// PromptSession is the three-tier structured session summary (tier 3).
	PromptSession = "session"
	// PromptRepair is the drift repair pass naming what a summary omitted.
	PromptRepair = "repair"
	// PromptProbeAnswer asks an agent that sees only a compacted
	// conversation the probe questions (the bench's LLM-judge mode).
	PromptProbeAnswer = "probe-answer"
	// PromptProbeGrade grades those answers 0–5 against the references.
	PromptProbeGrade = "probe-grade"
)

//go:embed prompts/*.md
var promptFS embed.FS

// Prompt is one versioned system prompt. Version is recorded with every run,
// so a change to a prompt's wording must come with a new version.
type Prompt struct {
	// Name is the file name without extension, for example "chunk".
	Name string
	// Version is the front-matter version, for example "chunk-v1".
	Version string
	// System is the raw text/template source of the system message.
	System string

	tmpl *template.Template
}

// versionPattern keeps versions short and greppable in audit rows.
var versionPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]*-v[0-9]+$`)

var (
	promptsOnce sync.Once
	promptsByID map[string]Prompt
	promptsErr  error
)

// loadPrompts parses every embedded prompt once; a broken file fails every
// lookup rather than only the runs that happen to use it.
func loadPrompts() (map[string]Prompt, error) {
	promptsOnce.Do(func() {
		entries, err := promptFS.ReadDir("prompts")
		if err != nil {
			promptsErr = fmt.Errorf("read embedded prompts: %w", err)
			return
		}
		out := make(map[string]Prompt, len(entries))
		for _, e := range entries {
			name, ok := strings.CutSuffix(e.Name(), ".md")
			if !ok || e.IsDir() {
				continue
			}
			raw, err := promptFS.ReadFile("prompts/" + e.Name())
			if err != nil {
				promptsErr = fmt.Errorf("read prompt %s: %w", e.Name(), err)
				return
			}
			p, err := parsePrompt(name, string(raw))
			if err != nil {
				promptsErr = fmt.Errorf("prompt file prompts/%s: %w", e.Name(), err)
				return
			}
			out[name] = p
		}
		promptsByID = out
	})
	return promptsByID, promptsErr
}

// parsePrompt reads a file of the form
//
//	---
//	version: chunk-v1
//	---
//	template text
func parsePrompt(name, raw string) (Prompt, error) {
	raw = strings.ReplaceAll(raw, "\r\n", "\n")
	rest, ok := strings.CutPrefix(raw, "---\n")
	if !ok {
		return Prompt{}, fmt.Errorf("missing front matter: the file must start with a line \"---\"")
	}
	// The leading newline lets an empty front matter ("---\n---\n") close.
	front, body, ok := strings.Cut("\n"+rest, "\n---\n")
	front = strings.TrimPrefix(front, "\n")
	if !ok {
		return Prompt{}, fmt.Errorf("front matter is not closed by a line \"---\"")
	}
	p := Prompt{Name: name}
	for i, line := range strings.Split(front, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			return Prompt{}, fmt.Errorf("front matter line %d %q: want \"key: value\"", i+2, line)
		}
		switch strings.TrimSpace(key) {
		case "version":
			p.Version = strings.TrimSpace(value)
		default:
			return Prompt{}, fmt.Errorf("front matter line %d: unknown key %q", i+2, strings.TrimSpace(key))
		}
	}
	if p.Version == "" {
		return Prompt{}, fmt.Errorf("front matter has no version")
	}
	if !versionPattern.MatchString(p.Version) || !strings.HasPrefix(p.Version, name+"-v") {
		return Prompt{}, fmt.Errorf("version %q must look like %q", p.Version, name+"-v1")
	}
	p.System = strings.TrimSpace(body)
	if p.System == "" {
		return Prompt{}, fmt.Errorf("empty prompt body")
	}
	tmpl, err := template.New(name).Option("missingkey=error").Parse(p.System)
	if err != nil {
		return Prompt{}, fmt.Errorf("parse template: %w", err)
	}
	p.tmpl = tmpl
	return p, nil
}

// LoadPrompt returns the embedded prompt with the given name (see the
// Prompt* constants).
func LoadPrompt(name string) (Prompt, error) {
	all, err := loadPrompts()
	if err != nil {
		return Prompt{}, err
	}
	p, ok := all[name]
	if !ok {
		return Prompt{}, fmt.Errorf("unknown prompt %q (have %s)", name, strings.Join(sortedKeys(all), ", "))
	}
	return p, nil
}

// PromptNames lists the embedded prompts in sorted order.
func PromptNames() []string {
	all, err := loadPrompts()
	if err != nil {
		return nil
	}
	return sortedKeys(all)
}

func sortedKeys(m map[string]Prompt) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// PromptData is what a prompt template sees. Targets are filled in both
// units, so a template may speak in tokens or in characters.
type PromptData struct {
	TargetTokens int
	TargetChars  int
	Context      string
	Missing      []string
	ArchiveRef   string
}

// dataFor derives the template data from a request: a target given in one
// unit is converted to the other at 4 characters per token.
func dataFor(req Request) PromptData {
	d := PromptData{
		TargetTokens: req.TargetTokens,
		TargetChars:  req.TargetChars,
		Context:      req.Context,
		Missing:      req.Missing,
		ArchiveRef:   req.ArchiveRef,
	}
	if d.TargetTokens <= 0 && d.TargetChars > 0 {
		d.TargetTokens = (d.TargetChars + CharsPerToken - 1) / CharsPerToken
	}
	if d.TargetChars <= 0 && d.TargetTokens > 0 {
		d.TargetChars = d.TargetTokens * CharsPerToken
	}
	return d
}

// Render executes the prompt's template for a request and returns the system
// message.
func (p Prompt) Render(req Request) (string, error) {
	if p.tmpl == nil {
		return "", fmt.Errorf("prompt %q was not loaded with LoadPrompt", p.Name)
	}
	var b strings.Builder
	if err := p.tmpl.Execute(&b, dataFor(req)); err != nil {
		return "", fmt.Errorf("render prompt %s: %w", p.Version, err)
	}
	return b.String(), nil
}
