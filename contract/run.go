// Package contract is what crosses Temporal between the gateway that
// starts runs, the workflows and the activities: the names of the
// workflows, their signal and queries, their inputs and results, and the
// run's identity that every step carries. The gateway depends on this
// package, not on the workflow or activity code.
//
// Only S3 keys and small metadata are in these types, never conversation
// text. Recorded histories must keep decoding: add fields with omitempty,
// never rename or retype one.
package contract

import (
	"encoding/json"

	"github.com/ctxcompact/orchestrator/internal/policy"
)

// The triggers of a run (the event's kind): the service decides a
// threshold event's compaction (an empty trigger, from before kinds were
// recorded, is one), and a proxy event's, which the provider-compatible
// proxy starts when a conversation crosses its trigger, the same way; a
// checkpoint or manual event is the caller's intent.
const (
	TriggerThreshold  = "threshold"
	TriggerCheckpoint = "checkpoint"
	TriggerManual     = "manual"
	TriggerProxy      = "proxy"
)

// Automatic reports whether a run of trigger was decided by the service
// (threshold or proxy), not asked for by the caller.
func Automatic(trigger string) bool {
	return trigger == TriggerThreshold || trigger == TriggerProxy || trigger == ""
}

// Run identifies a compaction run and the settings every step needs.
type Run struct {
	ID        string          `json:"id"`
	Tenant    string          `json:"tenant"`
	Session   string          `json:"session"`
	EventID   string          `json:"event_id"`
	Trigger   string          `json:"trigger"`
	Preset    string          `json:"preset"`
	Overrides json.RawMessage `json:"overrides,omitempty"`
	// Model is the agent's model: it picks the token encoding and the
	// default context limit.
	Model        string `json:"model"`
	ContextLimit int    `json:"context_limit"`
	ReplayOf     string `json:"replay_of,omitempty"`
	// ObservedTurns are the agent's calls since the session's previous
	// compaction, as an incremental event showed them; 0 when not known.
	// The commit prices the run's net saving over them (else COST_TURNS).
	ObservedTurns int `json:"observed_turns,omitempty"`
	// Resolved is the run's preset as the plan step resolved it (name,
	// then Overrides) and recorded it in the history: the workflow hands
	// it to every later S3/Postgres step so that no step resolves it
	// again, and a preset file or built-in default that changes while a
	// run is live cannot change its later steps. Those steps are local
	// activities, whose inputs stay out of the history; the summarizer
	// calls get SummarizerModel instead. Nil for the plan step, which
	// resolves Preset and Overrides.
	Resolved *policy.Preset `json:"resolved,omitempty"`
}
