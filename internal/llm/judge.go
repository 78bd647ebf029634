package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/drift"
)

// PromptJudge asks the model for the three-tier drift verdict of a summary
// (Context) against its transcript (Text), as JSON in JudgeSchema.
const PromptJudge = "judge"

// JudgeSchemaName names the response format of a judge call.
const JudgeSchemaName = "drift_verdict"

// JudgeSchema is the JSON schema of a judge's answer (OpenAI structured
// outputs, strict).
var JudgeSchema = json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "required": ["checks"],
  "properties": {
    "checks": {
      "type": "array",
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["name", "passed", "missing", "note"],
        "properties": {
          "name": {"type": "string", "enum": ["intent", "trajectory", "premature-completion", "clarification"]},
          "passed": {"type": "boolean"},
          "missing": {"type": "array", "items": {"type": "string"}},
          "note": {"type": "string"}
        }
      }
    }
  }
}`)

// JudgeCheck is one check of a judge's verdict.
type JudgeCheck struct {
	Name    string   `json:"name"`
	Passed  bool     `json:"passed"`
	Missing []string `json:"missing"`
	Note    string   `json:"note"`
}

type judgeVerdict struct {
	Checks []JudgeCheck `json:"checks"`
}

// ParseJudgeVerdict reads a judge's answer: exactly the four checks, each
// once. Anything else is an error, and the deterministic checks decide.
func ParseJudgeVerdict(text string) ([]JudgeCheck, error) {
	text = strings.TrimSpace(text)
	text = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(text, "```json"), "```"), "```")
	var v judgeVerdict
	if err := json.Unmarshal([]byte(strings.TrimSpace(text)), &v); err != nil {
		return nil, fmt.Errorf("judge verdict is not the JSON asked for: %w", err)
	}
	want := []string{drift.CheckIntent, drift.CheckTrajectory, drift.CheckPremature, drift.CheckClarification}
	byName := map[string]JudgeCheck{}
	for _, c := range v.Checks {
		if _, dup := byName[c.Name]; dup {
			return nil, fmt.Errorf("judge verdict names %q twice", c.Name)
		}
		byName[c.Name] = c
	}
	out := make([]JudgeCheck, 0, len(want))
	for _, name := range want {
		c, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("judge verdict lacks the %q check", name)
		}
		out = append(out, c)
	}
	if len(byName) != len(want) {
		return nil, errors.New("judge verdict has unknown checks")
	}
	return out, nil
}

// HeuristicVerdict is the deterministic checks rendered as a judge's
// answer: the offline judge, and the test server's.
func HeuristicVerdict(transcript, summary string) string {
	var v judgeVerdict
	for _, c := range drift.SessionChecks(transcript, summary) {
		missing := c.Missing
		if missing == nil {
			missing = []string{}
		}
		v.Checks = append(v.Checks, JudgeCheck{Name: c.Name, Passed: c.Passed, Missing: missing, Note: c.Note})
	}
	data, _ := json.Marshal(v)
	return string(data)
}
