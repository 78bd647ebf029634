package activities

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// Every activity is one step of a run, and every step has the same frame:
// begin starts its clock and heartbeat, the body loads its inputs (load,
// text), does its domain work and saves what it made (save, putText), and
// end classifies the error and records the attempt. The body only fills
// the record's figures.

// stepRecord is filled by an activity and written by record.
type stepRecord struct {
	kind             string
	inputSize        int64
	outputSize       int64
	promptTokens     int
	completionTokens int
	model            string
	promptVersion    string
	// written is set by a step that wrote its own successful record
	// with its state change (commit), so record does not write it again.
	written bool
}

// attempt is one attempt of a step while it runs: the record it fills
// (the embedded stepRecord) and what end needs to write it.
type attempt struct {
	stepRecord
	a       *Activities
	ctx     context.Context
	run     contract.Run
	name    string
	started time.Time
	stop    func() // stops the heartbeat
}

// begin is every step's prologue: it starts the attempt's clock and its
// heartbeat. Pair it with `defer rec.end(&err, &res.Recorded)`.
func (a *Activities) begin(ctx context.Context, run contract.Run, name, kind string) *attempt {
	return &attempt{stepRecord: stepRecord{kind: kind}, a: a, ctx: ctx, run: run, name: name,
		started: time.Now(), stop: a.heartbeat(ctx)}
}

// row is the attempt's record, ending now.
func (x *attempt) row(stepErr error) store.Step {
	attemptNo := 1
	if activity.IsActivity(x.ctx) {
		attemptNo = int(activity.GetInfo(x.ctx).Attempt)
	}
	st := store.Step{
		RunID: x.run.ID, Name: x.name, Attempt: attemptNo, Kind: x.kind,
		InputSize: x.inputSize, OutputSize: x.outputSize,
		PromptTokens: x.promptTokens, CompletionTokens: x.completionTokens,
		Model: x.model, PromptVersion: x.promptVersion, Duration: time.Since(x.started),
		At: time.Now().UTC(),
		// Drawn once per execution: the retry in end is the same
		// write, an execution after a worker death is a new row.
		Execution: newExecutionID(),
	}
	if stepErr != nil {
		// The row shows the caller the public description; the whole
		// error goes to the log.
		_, st.Error = Describe(stepErr)
		logger(x.ctx).Warn("step failed", "run", x.run.ID, "step", x.name, "attempt", attemptNo, "error", stepErr)
	}
	return st
}

// end stops the heartbeat and appends the attempt to the run's history,
// setting *err to the step's error classified (see classify): every step
// ends with rec.end, so the retry decision for an error nobody classified
// is made here, once. The attempt number comes from Temporal, so a retried
// write of the same attempt adds nothing; a new attempt adds its own row.
// A step that succeeded hands its record back to the workflow in out
// instead, which writes it with the run's end (one round trip for all).
func (x *attempt) end(err *error, out *Recorded) {
	x.stop()
	stepErr := classify(*err)
	*err = stepErr
	st := x.row(stepErr)
	x.a.Metrics.Step(x.kind, st.Attempt, st.Duration, stepErr)
	switch {
	case stepErr == nil && x.written:
		return
	case stepErr == nil && out != nil:
		out.StepRecord = &st
		return
	}
	werr := x.a.Store.RecordStep(x.ctx, st)
	if werr != nil && store.IsRetryable(werr) {
		// The write is idempotent; one more try rides out a dropped
		// connection.
		werr = x.a.Store.RecordStep(x.ctx, st)
	}
	if werr != nil {
		// The step itself succeeded or failed on its own; a lost history
		// row must not turn into a retry of an LLM call.
		logger(x.ctx).Warn("record step", "run", x.run.ID, "step", x.name, "error", werr)
	}
}

// logger returns the activity logger, or a no-op one outside activities
// (unit tests call the methods directly).
func logger(ctx context.Context) interface {
	Info(string, ...interface{})
	Warn(string, ...interface{})
} {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	return nopLogger{}
}

type nopLogger struct{}

func (nopLogger) Info(string, ...interface{}) {}

func (nopLogger) Warn(string, ...interface{}) {}

// newExecutionID is a random id for one execution of a step.
func newExecutionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
