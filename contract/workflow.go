package contract

import "net/url"

// The workflows' registered names.
const (
	// SessionWorkflow serializes the runs of one session.
	SessionWorkflow = "Session"
	// CompactionWorkflow is one run, a child of its session's workflow.
	CompactionWorkflow = "Compaction"
)

// EventSignal is the signal that hands a session workflow a new event.
const EventSignal = "event"

// OutcomeUpdate answers a compaction run's outcome as soon as the run's
// final state is recorded (its commit, or its failure), before the
// release of its intermediates and the start of its webhook delivery,
// which the workflow's own result waits for. The update fails with the
// run's error when the run failed.
const OutcomeUpdate = "outcome"

// AdmitSignal tells a session workflow that its run waiting for
// admission (TENANT_RUNS_IN_FLIGHT) was admitted by another session of
// the tenant whose run ended; its value is the run id.
const AdmitSignal = "admitted"

// QueueQuery returns the run ids waiting in a session's queue, the run
// waiting for admission first.
const QueueQuery = "queue"

// SessionInput is the state of a session workflow, carried across
// continue-as-new.
type SessionInput struct {
	Tenant  string            `json:"tenant"`
	Session string            `json:"session"`
	Pending []CompactionInput `json:"pending,omitempty"`
	Seen    []string          `json:"seen,omitempty"`
}

// SessionWorkflowID is the id of a session's workflow: one per tenant and
// session, so that at most one compaction runs per session at a time.
//
// Temporal carries a workflow id in gRPC headers, which take printable
// ASCII only. A name of printable ASCII keeps the id it has always had
// (running sessions must not fork); any other name (été, 会话) is
// percent-encoded under its own prefix, "session-u/", which no plain
// name's id can have, so two names never share an id. Tenants are
// ASCII already (blob.ValidateTenant).
func SessionWorkflowID(tenant, session string) string {
	if printableASCII(session) {
		return "session/" + tenant + "/" + session
	}
	return "session-u/" + tenant + "/" + url.PathEscape(session)
}

// printableASCII reports whether s has only the bytes a gRPC header
// value may carry (space to '~').
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// ProgressQuery returns the steps of a live compaction run that have
// ended so far (Progress): with batched step records, Postgres holds them
// only once the run ends.
const ProgressQuery = "progress"

// Progress answers ProgressQuery: the steps that ended, oldest first.
type Progress struct {
	Steps []StepDone `json:"steps"`
}

// StepDone is one step attempt that ended.
type StepDone struct {
	Name    string `json:"name"`
	Attempt int    `json:"attempt"`
}

// CompactionInput starts one compaction run. The conversation itself is in
// S3 at InputKey (claim check).
type CompactionInput struct {
	Run         Run    `json:"run"`
	InputKey    string `json:"input_key"`
	InputSHA256 string `json:"input_sha256"`
	// LLMTaskQueue is the task queue of the run's summarizer calls, whose
	// worker holds the queue-wide rate limit; empty is the workflow's own
	// queue.
	LLMTaskQueue string `json:"llm_task_queue,omitempty"`
	// DeliveryTaskQueue is the task queue of the run's webhook delivery,
	// whose worker's slots deliveries alone take; empty is the
	// workflow's own queue.
	DeliveryTaskQueue string `json:"delivery_task_queue,omitempty"`
	// Visibility sets the run's search attributes and memo (see
	// visibility.go); the gateway sets it when the namespace has them.
	Visibility bool `json:"visibility,omitempty"`
	// Judge asks the summarizer for the three-tier drift verdict of each
	// history summary (an LLM judge); the gateway sets it when an LLM is
	// configured. Without it, the deterministic checks decide.
	Judge bool `json:"judge,omitempty"`
}
