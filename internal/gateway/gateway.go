// Package gateway is how callers reach the pipeline: it validates an
// event, stores the conversation in S3, claims the event id in Postgres and
// hands the event to the session's workflow. The HTTP API and the CLI are
// thin layers over it.
package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/idcheck"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/webhook"
)

// Event kinds.
const (
	KindThreshold  = contract.TriggerThreshold
	KindCheckpoint = contract.TriggerCheckpoint
	KindManual     = contract.TriggerManual
	KindProxy      = contract.TriggerProxy
)

// ErrConflict is returned when an event id of a session is reused with
// another body; the error is a *ConflictError naming the run that holds
// the id.
var ErrConflict = errors.New("event id already used with a different request")

// ConflictError is an event id of the session already claimed by run
// RunID with another request.
type ConflictError struct{ RunID string }

func (e *ConflictError) Error() string {
	return ErrConflict.Error() + " (held by run " + e.RunID + ")"
}

// Is makes errors.Is(err, ErrConflict) hold.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// DefaultBreaker is the loop breaker of a deployment that sets none: three
// failing or useless runs within an hour stop a session's automatic
// compactions.
var DefaultBreaker = store.BreakerRule{Runs: 3, Window: time.Hour, MinFreed: 0.05}

// BreakerOpenError refuses an automatic event of a session whose breaker
// is open (see store.BreakerRule); Until is when it closes by itself.
type BreakerOpenError struct {
	Reason string
	Until  time.Time
}

func (e *BreakerOpenError) Error() string { return "breaker open: " + e.Reason }

// InputError is a request the caller must fix; Field names what is wrong.
type InputError struct {
	Field string
	Err   error
}

func (e *InputError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// Event is a caller's request to compact a session.
type Event struct {
	Tenant       string          `json:"tenant"`
	Session      string          `json:"session"`
	EventID      string          `json:"event_id"`
	Kind         string          `json:"kind"`
	Model        string          `json:"model"`
	ContextLimit int             `json:"context_limit"`
	Preset       string          `json:"preset,omitempty"`
	Overrides    json.RawMessage `json:"overrides,omitempty"`
	// Conversation is the conversation inline, in any supported format;
	// ConversationKey names one already in S3 (under the tenant's prefix).
	Conversation    json.RawMessage `json:"conversation,omitempty"`
	ConversationKey string          `json:"conversation_key,omitempty"`
	// Base and Messages make an incremental event: the session's latest
	// output (Base) continued with the messages appended since, in its
	// wire format. The gateway rebuilds the whole conversation.
	Base     *Base           `json:"base,omitempty"`
	Messages json.RawMessage `json:"messages,omitempty"`
	ReplayOf string          `json:"replay_of,omitempty"`
	// recordedOverrides is set when Overrides are a replayed run's
	// effective settings (deployment's included), which were capped when
	// that run was submitted and are not the caller's.
	recordedOverrides bool
}

// Base names the conversation an incremental event continues: the
// session's latest output, by its run and SHA-256 (as the run's answer
// gave them).
type Base struct {
	RunID  string `json:"run_id"`
	SHA256 string `json:"sha256"`
}

// Submitted is the answer to a submission.
type Submitted struct {
	RunID string `json:"run_id"`
	// Existing is true when the event had been submitted before: the
	// answer is the original run.
	Existing bool   `json:"existing"`
	InputKey string `json:"input_key"`
	// Generation is the session's (1 for a name never erased); with
	// PreviousErasure, the erasure before it, it tells a caller that the
	// name it used was erased and this event started it anew.
	Generation      int            `json:"session_generation"`
	PreviousErasure *store.Erasure `json:"-"`
}

// Gateway submits events and waits for runs.
type Gateway struct {
	Store     *store.Store
	Blob      *blob.Store
	Temporal  client.Client
	TaskQueue string
	// LLMTaskQueue is where a run's summarizer calls go; empty sends
	// them to TaskQueue with the steps (no queue-wide rate limit).
	LLMTaskQueue string
	// DeliveryTaskQueue is where webhook deliveries run and
	// EraseTaskQueue where erasures run, each polled by a worker with
	// slots of its own; empty is TaskQueue.
	DeliveryTaskQueue string
	EraseTaskQueue    string
	// Fairness starts each tenant's workflows with the tenant as their
	// fairness key (TENANT_FAIRNESS), which their runs, activities and
	// deliveries inherit.
	Fairness      bool
	DefaultPreset string
	// Overrides are the deployment's preset overrides (preset file and
	// SYNAPSE_COMPACT_* variables). They are merged under each event's own
	// overrides here, once, so that a run carries its effective settings
	// and a later configuration change cannot alter a run in flight or
	// its replay.
	Overrides policy.Overrides
	// Breaker stops a session's automatic events after repeated failing or
	// useless runs; the zero rule never stops them.
	Breaker store.BreakerRule
	// Caps bound the caller's overrides (zero fields: policy.DefaultCaps).
	Caps policy.Caps
	// SearchAttributes sets the workflows' typed search attributes and
	// memo; the namespace must have them registered (see
	// contract.SearchAttributes).
	SearchAttributes bool
	// Judge asks the summarizer to judge history summaries (the three-tier design's
	// drift checks); set when an LLM is configured.
	Judge bool
	// Logger receives what the caller is not told (a failed cleanup);
	// nil discards.
	Logger *slog.Logger
	// WebhookPolicy decides which endpoint URLs may be registered.
	WebhookPolicy webhook.Policy
}

// RunID derives a run's id from its tenant, session and event id, so that
// the same event always names the same run.
func RunID(tenant, session, eventID string) string {
	sum := sha256.Sum256([]byte(tenant + "\x00" + session + "\x00" + eventID))
	return "run-" + hex.EncodeToString(sum[:12])
}

// Submit validates and stores an event and starts (or joins) its run.
func (g *Gateway) Submit(ctx context.Context, ev Event) (Submitted, error) {
	set, err := g.validate(&ev)
	if err != nil {
		return Submitted{}, err
	}
	data, base, err := g.conversation(ctx, ev)
	if err != nil {
		return Submitted{}, err
	}
	if err := g.checkBreaker(ctx, ev, data); err != nil {
		return Submitted{}, err
	}
	conv, err := conversation.ParseAny(data)
	if ev.Base != nil {
		if err := checkContinued(conv, err, base); err != nil {
			return Submitted{}, err
		}
	} else if err != nil {
		return Submitted{}, &InputError{Field: "conversation", Err: err}
	}
	if err := checkToolNames(conv); err != nil {
		return Submitted{}, err
	}
	hash, err := requestHash(ev, data)
	if err != nil {
		return Submitted{}, err
	}
	resolvedJSON, err := json.Marshal(set.preset)
	if err != nil {
		return Submitted{}, fmt.Errorf("encode resolved preset: %w", err)
	}
	// Everything is validated: only now is anything stored.
	run, sub, err := g.claim(ctx, ev, set.overrides, resolvedJSON, hash, data, observedTurns(ev))
	if err != nil {
		return Submitted{}, err
	}
	// Signalling again for a known event is safe: the session drops a
	// queued duplicate, and a finished run's id cannot be started twice.
	// When Temporal cannot be reached the run stays pending, claimed with
	// everything it needs: the caller's retry with the same event id
	// starts it (an outage answers 503), and so does the reconciler.
	in, err := g.inputOf(run)
	if err != nil {
		return Submitted{}, err
	}
	if err := g.start(ctx, in); err != nil {
		return Submitted{}, g.startFailed(ctx, run.ID, err)
	}
	return Submitted{RunID: sub.RunID, InputKey: run.InputKey, Existing: sub.Existing, Generation: sub.Generation,
		PreviousErasure: sub.PreviousErasure}, nil
}

// claim stores the original of a validated event, then claims the event
// and records its run in one transaction, so that the row holds what the
// caller asked for from the moment the event is accepted. It returns the
// run as recorded: a retry's is the first claim's, with the original that
// claim stored.
func (g *Gateway) claim(ctx context.Context, ev Event, overrides json.RawMessage, resolved []byte, hash string, data []byte, turns int) (store.Run, store.Submission, error) {
	ref, stored, err := g.storeOriginal(ctx, ev, data)
	if err != nil {
		return store.Run{}, store.Submission{}, fmt.Errorf("store conversation: %w", err)
	}
	run := store.Run{
		ID: RunID(ev.Tenant, ev.Session, ev.EventID), Tenant: ev.Tenant, Session: ev.Session, EventID: ev.EventID, Trigger: ev.Kind,
		Preset: ev.Preset, InputKey: ref.Key, ReplayOf: ev.ReplayOf, Status: store.RunPending,
		AgentModel: ev.Model, ContextLimit: ev.ContextLimit, Overrides: overrides, InputSHA256: ref.SHA256,
		ResolvedPreset: resolved,
	}
	if ev.Base != nil {
		run.BaseRunID, run.ObservedTurns = ev.Base.RunID, turns
	}
	sub, err := g.Store.SubmitRun(ctx, run, hash, func(ctx context.Context) error {
		_, err := g.Blob.PutContentVerified(ctx, ev.Tenant, blob.KindArchive, data)
		return err
	})
	if stored && (err != nil || sub.Conflict || sub.Existing) {
		// Refused, failed, or a retry re-encoded into other bytes: the
		// object this call wrote may have no run (a retry of the same
		// bytes keeps it, since its run refers to it).
		g.discardOriginal(ctx, ev.Tenant, ref.Key)
	}
	switch {
	case errors.As(err, new(*BaseHeldError)):
		return store.Run{}, sub, err
	case errors.Is(err, store.ErrSessionErasing):
		// Nothing new lands in a session that is being erased.
		return store.Run{}, sub, ErrSessionErasing
	case err != nil:
		return store.Run{}, sub, fmt.Errorf("submit run: %w", err)
	case sub.Conflict:
		return store.Run{}, sub, &ConflictError{RunID: sub.RunID}
	case sub.Existing:
		// A retry: the run is the first claim's, with the original it
		// recorded (a re-encoded retry's own bytes were just discarded).
		if run, err = g.Store.GetRun(ctx, sub.RunID); err != nil {
			return store.Run{}, sub, fmt.Errorf("read the claimed run: %w", err)
		}
	}
	run.ID = sub.RunID
	return run, sub, nil
}

// inputOf is the workflow input of a claimed run, from what its row
// recorded at submit: the preset resolved then is the run's snapshot,
// which every step uses, so that a preset file or a built-in default that
// changes while the run waits or runs cannot change it.
func (g *Gateway) inputOf(r store.Run) (contract.CompactionInput, error) {
	if len(r.ResolvedPreset) == 0 {
		return contract.CompactionInput{}, fmt.Errorf("run %s has no resolved preset", r.ID)
	}
	var preset policy.Preset
	if err := json.Unmarshal(r.ResolvedPreset, &preset); err != nil {
		return contract.CompactionInput{}, fmt.Errorf("run %s: decode its resolved preset: %w", r.ID, err)
	}
	return contract.CompactionInput{
		Run: contract.Run{
			ID: r.ID, Tenant: r.Tenant, Session: r.Session, EventID: r.EventID, Trigger: r.Trigger,
			Preset: r.Preset, Overrides: r.Overrides, Model: r.AgentModel, ContextLimit: r.ContextLimit, ReplayOf: r.ReplayOf,
			ObservedTurns: r.ObservedTurns, Resolved: &preset,
		},
		InputKey: r.InputKey, InputSHA256: r.InputSHA256, LLMTaskQueue: g.LLMTaskQueue, DeliveryTaskQueue: g.DeliveryTaskQueue,
		Visibility: g.SearchAttributes, Judge: g.Judge,
	}, nil
}

// start hands a claimed run to its session's workflow, starting the
// session when it is not running.
func (g *Gateway) start(ctx context.Context, in contract.CompactionInput) error {
	tenant, session := in.Run.Tenant, in.Run.Session
	opts := client.StartWorkflowOptions{ID: contract.SessionWorkflowID(tenant, session), TaskQueue: g.TaskQueue, Priority: g.priority(tenant)}
	if g.SearchAttributes {
		opts.TypedSearchAttributes = contract.SessionSearchAttributes(tenant, session)
	}
	_, err := g.Temporal.SignalWithStartWorkflow(ctx, contract.SessionWorkflowID(tenant, session), contract.EventSignal, in,
		opts, contract.SessionWorkflow, contract.SessionInput{Tenant: tenant, Session: session})
	if err != nil {
		return fmt.Errorf("start session workflow: %w", err)
	}
	return nil
}

// startFailed decides what a failed start of run id leaves behind. An
// outage (Temporal down, slow or overloaded, or the call cut short)
// leaves the run pending, claimed with everything it needs, for the
// caller's retry or the reconciler. Temporal refusing the start itself
// will refuse every retry too: the run is failed now, with the reason,
// so that it never waits forever (nor an erasure of its session behind
// it), and the caller is told the same.
func (g *Gateway) startFailed(ctx context.Context, id string, err error) error {
	if temporalTransient(err) {
		return err
	}
	reason := "the session workflow could not be started: " + err.Error()
	if _, ferr := g.Store.FailRun(ctx, id, store.Failure{Class: store.ErrorInternal, Message: reason}); ferr != nil {
		return fmt.Errorf("%w (and recording the run failed: %v)", err, ferr)
	}
	return fmt.Errorf("run %s failed: %w", id, err)
}

// TemporalOutage reports whether err is Temporal saying it is down, too
// slow or overloaded: the one place the gateway and the API (its 503)
// decide it.
func TemporalOutage(err error) bool {
	var unavail *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	var exhausted *serviceerror.ResourceExhausted
	return errors.As(err, &unavail) || errors.As(err, &deadline) || errors.As(err, &exhausted)
}

// temporalTransient reports whether a Temporal client error may pass on
// a retry: an outage (TemporalOutage), or a call cut short. Anything else
// (an invalid argument, a refused header) is permanent.
func temporalTransient(err error) bool {
	var canceled *serviceerror.Canceled
	switch {
	case TemporalOutage(err), errors.As(err, &canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Canceled, codes.Aborted:
		return true
	}
	return false
}

// deliveryQueue is the task queue deliveries start on.
func (g *Gateway) deliveryQueue() string {
	if g.DeliveryTaskQueue != "" {
		return g.DeliveryTaskQueue
	}
	return g.TaskQueue
}

// eraseQueue is the task queue erasures start on.
func (g *Gateway) eraseQueue() string {
	if g.EraseTaskQueue != "" {
		return g.EraseTaskQueue
	}
	return g.TaskQueue
}

// priority is the priority of tenant's workflows: the tenant as their
// fairness key, so that a server with fairness on hands out the tenants'
// tasks in turn and one tenant's backlog does not delay another's. Every
// tenant weighs the same.
func (g *Gateway) priority(tenant string) temporal.Priority {
	if !g.Fairness {
		return temporal.Priority{}
	}
	return temporal.Priority{FairnessKey: fairnessKey(tenant)}
}

// fairnessKey is tenant as a fairness key, which Temporal bounds to 64
// bytes: a longer tenant name is cut and suffixed with a hash of the
// whole, so that two long names sharing a prefix stay apart.
func fairnessKey(tenant string) string {
	const limit = 64
	if len(tenant) <= limit {
		return tenant
	}
	sum := sha256.Sum256([]byte(tenant))
	suffix := "~" + hex.EncodeToString(sum[:8])
	return tenant[:limit-len(suffix)] + suffix
}

// checkBreaker refuses an automatic event of a session whose breaker is
// open for its conversation (data), before anything is stored. A manual
// event is the probe and always runs; a resubmitted event keeps its run.
func (g *Gateway) checkBreaker(ctx context.Context, ev Event, data []byte) error {
	if ev.Kind == KindManual || ev.ReplayOf != "" || !g.Breaker.Enabled() {
		return nil
	}
	sum := sha256.Sum256(data)
	b, err := g.Store.SessionBreaker(ctx, ev.Tenant, ev.Session, g.Breaker, time.Now(), hex.EncodeToString(sum[:]))
	if err != nil || !b.Open {
		return err
	}
	if run, err := g.Store.EventRun(ctx, ev.Tenant, ev.Session, ev.EventID); err != nil || run != "" {
		return err
	}
	return &BreakerOpenError{Reason: b.Reason, Until: b.Until}
}

// checkOverrides applies the caps to the caller's own overrides.
func (g *Gateway) checkOverrides(ev Event) error {
	if ev.recordedOverrides {
		return nil
	}
	return policy.CheckCallerOverrides(ev.Overrides, g.Caps)
}

// validate checks an event, naming the field of the first problem, and
// resolves its preset.
func (g *Gateway) validate(ev *Event) (settings, error) {
	if err := blob.ValidateTenant(ev.Tenant); err != nil {
		return settings{}, &InputError{Field: "tenant", Err: err}
	}
	if err := idcheck.Session(ev.Session); err != nil {
		return settings{}, &InputError{Field: "session", Err: err.(*idcheck.Error).Unnamed()}
	}
	if err := idcheck.EventID(ev.EventID); err != nil {
		return settings{}, &InputError{Field: "event_id", Err: err.(*idcheck.Error).Unnamed()}
	}
	switch ev.Kind {
	case "":
		ev.Kind = KindThreshold
	case KindThreshold, KindCheckpoint, KindManual, KindProxy:
	default:
		return settings{}, &InputError{Field: "kind", Err: fmt.Errorf("%q is not one of threshold, checkpoint, manual, proxy", ev.Kind)}
	}
	if ev.ContextLimit < 0 {
		return settings{}, &InputError{Field: "context_limit", Err: errors.New("must not be negative")}
	}
	if ev.ContextLimit > MaxContextLimit {
		return settings{}, &InputError{Field: "context_limit", Err: fmt.Errorf("%d is above %d", ev.ContextLimit, MaxContextLimit)}
	}
	if ev.Model != "" {
		// The model names a counter and a window, lands in the run's row
		// and in operators' terminals: plain text, bounded.
		if err := idcheck.Check("model", ev.Model); err != nil {
			return settings{}, &InputError{Field: "model", Err: err.(*idcheck.Error).Unnamed()}
		}
	}
	set, err := g.settings(ev)
	if err != nil {
		return settings{}, err
	}
	if ev.Base != nil {
		if len(ev.Conversation) > 0 || ev.ConversationKey != "" {
			return settings{}, &InputError{Field: "base", Err: errors.New("an incremental event carries messages, not a conversation or conversation_key")}
		}
		if err := checkBase(*ev.Base, ev.Messages); err != nil {
			return settings{}, err
		}
		return set, nil
	}
	if len(ev.Messages) > 0 {
		return settings{}, &InputError{Field: "messages", Err: errors.New("messages continue a base: give base too")}
	}
	if (len(ev.Conversation) == 0) == (ev.ConversationKey == "") {
		return settings{}, &InputError{Field: "conversation", Err: errors.New("give exactly one of conversation and conversation_key")}
	}
	return set, nil
}

// settings resolves the event's preset (the deployment's default when it
// names none) with the deployment's overrides under the caller's, which
// must stay within the operator's caps; each problem is named by its
// field.
func (g *Gateway) settings(ev *Event) (settings, error) {
	if ev.Preset == "" {
		ev.Preset = g.DefaultPreset
	}
	if _, err := policy.Builtin(ev.Preset); err != nil {
		return settings{}, &InputError{Field: "preset", Err: err}
	}
	// The deployment's own overrides are not capped.
	if err := g.checkOverrides(*ev); err != nil {
		var oe *policy.OverrideError
		if errors.As(err, &oe) {
			field := "overrides"
			if oe.Field != "overrides" {
				field += "." + oe.Field
			}
			return settings{}, &InputError{Field: field, Err: errors.New(oe.Reason)}
		}
		return settings{}, &InputError{Field: "overrides", Err: err}
	}
	merged, err := policy.Merge(g.Overrides[ev.Preset], ev.Overrides)
	if err != nil {
		return settings{}, &InputError{Field: "overrides", Err: err}
	}
	preset, err := policy.Resolve(ev.Preset, merged)
	if err != nil {
		return settings{}, &InputError{Field: "overrides", Err: err}
	}
	return settings{overrides: merged, preset: preset}, nil
}

// settings are an event's effective overrides (the deployment's under
// the caller's) and the preset they resolve to: resolved here, once per
// run, and carried by the run as its snapshot (contract.Run.Resolved).
type settings struct {
	overrides json.RawMessage
	preset    policy.Preset
}

// MaxContextLimit bounds a caller's context_limit: far above any model's
// window (in tokens, or the ReAct two-layer design's characters), and within what a run's
// row holds.
const MaxContextLimit = 100_000_000

// checkToolNames refuses, before anything is stored, a conversation whose
// tool call ids or tool names are not plain text (a NUL, a control
// character, more than idcheck.MaxLen bytes): they become Postgres values
// of offload and step rows, and a run would fail on them after the
// event was accepted. The field names the message by its position in the
// caller's messages[].
func checkToolNames(conv conversation.Conversation) error {
	pos := conv.CallerIndexes()
	for i, m := range conv.Messages {
		for _, b := range m.Blocks {
			for _, f := range []struct{ name, value string }{{"tool_call_id", b.ToolID}, {"tool_name", b.ToolName}} {
				if f.value == "" {
					continue
				}
				if err := idcheck.Check(f.name, f.value); err != nil {
					return &InputError{Field: fmt.Sprintf("conversation.messages[%d].%s", pos[i], f.name), Err: err.(*idcheck.Error).Unnamed()}
				}
			}
		}
	}
	return nil
}

func (g *Gateway) conversation(ctx context.Context, ev Event) (data, base []byte, err error) {
	if ev.Base != nil {
		return g.continued(ctx, ev)
	}
	data, err = g.whole(ctx, ev)
	return data, nil, err
}

// whole is the conversation of an event that sends it whole: inline, or
// stored before under conversation_key.
func (g *Gateway) whole(ctx context.Context, ev Event) ([]byte, error) {
	if len(ev.Conversation) > 0 {
		return ev.Conversation, nil
	}
	if err := blob.ValidateTenant(ev.Tenant); err != nil {
		return nil, &InputError{Field: "tenant", Err: err}
	}
	// Exactly one of the tenant's content keys, nothing a prefix check
	// would let through ("tenants/a/../b/…").
	if err := blob.CheckOwned(ev.Tenant, ev.ConversationKey); err != nil {
		return nil, &InputError{Field: "conversation_key", Err: err}
	}
	data, err := g.Blob.Get(ctx, ev.ConversationKey)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, &InputError{Field: "conversation_key", Err: fmt.Errorf("%s not found", ev.ConversationKey)}
	}
	if err != nil {
		return nil, fmt.Errorf("read conversation: %w", err)
	}
	return data, nil
}

// storeOriginal stores the caller's exact bytes once, as the run's
// archive: the upload carries their SHA-256, which S3 checks
// (blob.Store.PutContentVerified), and the plan step records this object
// as the archive instead of writing a second copy of the same bytes. A
// conversation_key that already names one of the tenant's archives (a
// replay, or a caller sending a run's archive again) is used as it is:
// it was proven when it was written, and its bytes were just read and
// checked against its key.
//
// stored reports whether this call wrote the object.
func (g *Gateway) storeOriginal(ctx context.Context, ev Event, data []byte) (ref blob.Ref, stored bool, err error) {
	if ev.ConversationKey != "" {
		_, kind, sha, err := blob.ParseContentKey(ev.ConversationKey)
		if err == nil && kind == blob.KindArchive && sha == blob.SHA256Hex(data) {
			return blob.Ref{Key: ev.ConversationKey, SHA256: sha, Size: int64(len(data))}, false, nil
		}
	}
	ref, err = g.Blob.PutContentVerified(ctx, ev.Tenant, blob.KindArchive, data)
	return ref, err == nil, err
}

// discardOriginal deletes the original a failed submit stored, unless a
// run refers to it (the same bytes submitted before): a refused or
// failed event leaves nothing in S3. It runs on its own deadline, since
// the request's may be what failed, and a failure to clean up is logged,
// never the caller's error.
func (g *Gateway) discardOriginal(ctx context.Context, tenant, key string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := g.Store.DiscardInput(ctx, tenant, key, func(ctx context.Context) error {
		return g.Blob.Delete(ctx, key)
	}); err != nil {
		g.logger().Warn("a failed submit's original stays in S3", "tenant", tenant, "key", key, "error", err)
	}
}

// logger is Logger, or one that discards.
func (g *Gateway) logger() *slog.Logger {
	if g.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return g.Logger
}

// requestHash identifies what a request asks for, so that the same event
// id with another body is told apart from a plain retry.
//
// It hashes meaning, not bytes: the conversation and the overrides are
// compared in a canonical JSON form (keys sorted, whitespace dropped,
// numbers as written), so that a client that re-encodes the same event
// gets the same run, while any change of content, preset, model, limit or
// kind is a conflict. The stored input keeps the caller's exact bytes.
func requestHash(ev Event, conv []byte) (string, error) {
	// The conversation's canonical form is hashed as it is written (see
	// canonicalSum), never held: it is megabytes.
	inputSum, err := canonicalSum(conv)
	if err != nil {
		return "", &InputError{Field: "conversation", Err: err}
	}
	overrides, err := canonicalJSON(ev.Overrides)
	if err != nil {
		return "", &InputError{Field: "overrides", Err: err}
	}
	canon, _ := json.Marshal(struct {
		Kind, Model, Preset, Input, ReplayOf string
		Limit                                int
		Overrides                            json.RawMessage
	}{ev.Kind, ev.Model, ev.Preset, hex.EncodeToString(inputSum[:]), ev.ReplayOf, ev.ContextLimit, overrides})
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// canonicalJSON re-encodes a JSON value with object keys sorted and no
// insignificant whitespace; numbers keep their text (json.Number), so no
// precision is lost. Empty input is the empty value.
func canonicalJSON(data []byte) ([]byte, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// Progress returns the steps of a live run that have ended so far, from
// its workflow (see contract.ProgressQuery). A run that is queued, has
// ended, or was started before the query existed answers an error; its
// step records are in Postgres instead.
func (g *Gateway) Progress(ctx context.Context, runID string) (contract.Progress, error) {
	var p contract.Progress
	val, err := g.Temporal.QueryWorkflow(ctx, runID, "", contract.ProgressQuery)
	if err != nil {
		return p, fmt.Errorf("query progress of run %s: %w", runID, err)
	}
	if err := val.Get(&p); err != nil {
		return p, fmt.Errorf("decode progress of run %s: %w", runID, err)
	}
	return p, nil
}

// Wait waits for a run to finish and returns its result. It asks the
// run's workflow for its outcome (contract.OutcomeUpdate), which answers
// as soon as the run's final state is recorded, without waiting for the
// release of its intermediates or the start of its webhook delivery. A
// run still queued behind another run of its session has no workflow
// yet; Wait polls until it starts. A run whose workflow has closed is
// answered by the workflow's result.
func (g *Gateway) Wait(ctx context.Context, runID string) (contract.Outcome, error) {
	var res contract.Outcome
	// The child workflow usually starts within a workflow task of the
	// signal, so the first polls are quick; a run queued behind a long one
	// is polled less often.
	delay := 20 * time.Millisecond
	for {
		h, err := g.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: runID, UpdateName: contract.OutcomeUpdate, WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			if err = h.Get(ctx, &res); err == nil || ctx.Err() != nil {
				return res, err
			}
			// A failed run (or an update the workflow could not answer):
			// its workflow's result says it as it always has, a
			// *temporal.WorkflowExecutionError.
			err = g.Temporal.GetWorkflow(ctx, runID, "").Get(ctx, &res)
			return res, err
		}
		var nf *serviceerror.NotFound
		var notReady *serviceerror.WorkflowNotReady
		switch {
		case errors.As(err, &notReady):
			// A workflow task failed under the update (a worker lost
			// mid-task): Temporal retries the task, and the run goes
			// on, so the update is asked again after the delay; it is
			// not the run's failure.
		case !errors.As(err, &nf):
			return res, err
		}
		// Not found: not started yet, or closed already (an update is
		// refused once the workflow has closed).
		d, derr := g.Temporal.DescribeWorkflowExecution(ctx, runID, "")
		switch {
		case derr == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			err := g.Temporal.GetWorkflow(ctx, runID, "").Get(ctx, &res)
			return res, err
		case derr == nil:
			// Started between the two calls: asked again after the
			// delay, never in a tight loop.
		case !errors.As(derr, &nf):
			return res, derr
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
}
