// Package runview reads a tenant's run the one way the HTTP API, the MCP
// server and the web UI answer it: it waits for a run to be final (the
// run's row is the truth; its workflow's end is what wakes the wait),
// builds a run's answer (its outcome, and a committed run's handoff and
// conversation), reads a run's conversations as downloads and writes
// them with their size and checksum, and says which errors are "not
// found" and which "gone".
//
// Every read takes the caller's tenant and goes through the audit
// service's tenant-scoped reads: another tenant's run is ErrNotFound,
// exactly like one that does not exist, and every key read from a row is
// checked to lie under the tenant's prefix before it is read.
package runview

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// ErrNotFound is an unknown run, session or id, or another tenant's: the
// store's sentinel, which audit.ErrNotFound and gateway.ErrNotFound are
// too.
var ErrNotFound = store.ErrNotFound

// ErrNoHandoff reports a run without a handoff: only a run that commits
// CRITICAL, over its limit or at a checkpoint makes one.
var ErrNoHandoff = errors.New("run has no handoff")

// Waiter tells when a run's workflow ends (gateway.Gateway.Wait): nil
// or a *temporal.WorkflowExecutionError once it ended however it ended,
// ctx's error when ctx ends first, another error when it cannot tell.
type Waiter interface {
	Wait(ctx context.Context, runID string) (contract.Outcome, error)
}

// DefaultRecheck is how often a wait reads the run's row again when
// Reader.Recheck is zero.
const DefaultRecheck = time.Second

// Reader reads tenants' runs. Audit is required; the rest is optional.
type Reader struct {
	Audit *audit.Service
	// Workflows, when set, wakes a wait as soon as the run's workflow
	// ends; without it a wait reads the row every Recheck.
	Workflows Waiter
	// Draining, when set, is cancelled as the process starts shutting
	// down: every wait ends then with the run's status as it is.
	Draining context.Context
	// Recheck is how often a wait reads the run's row again, for a run
	// whose row is final before its workflow ends (the release of its
	// intermediates, a worker lost after the commit) or that Temporal
	// cannot say anything about; DefaultRecheck when zero.
	Recheck time.Duration
}

// Run returns tenant's run runID: ErrNotFound for another tenant's run
// or none.
func (r *Reader) Run(ctx context.Context, tenant, runID string) (store.Run, error) {
	return r.Audit.RunRow(ctx, tenant, runID)
}

// Wait waits up to wait for tenant's run runID to be final and returns
// its row as it last read it: final, or, when the wait ended first (its
// time, the server draining, or a workflow that ended without recording
// its run, which the reconciler marks), the status the run has then:
// the honest answer, which callers give as "still running, here is its
// id". wait <= 0 reads the run once. The caller leaving (ctx) is an
// error, as is a workflow service that cannot say whether the run ended.
// The run's row is the one source of truth; the workflow's end only
// wakes the wait early.
func (r *Reader) Wait(ctx context.Context, tenant, runID string, wait time.Duration) (store.Run, error) {
	run, err := r.Run(ctx, tenant, runID)
	if err != nil || run.Status.Final() || wait <= 0 {
		return run, err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if r.Draining != nil {
		stop := context.AfterFunc(r.Draining, cancel)
		defer stop()
	}
	ended := make(chan error, 1)
	if r.Workflows != nil {
		go func() {
			_, err := r.Workflows.Wait(wctx, run.ID)
			ended <- err
		}()
	}
	recheck := r.Recheck
	if recheck <= 0 {
		recheck = DefaultRecheck
	}
	tick := time.NewTicker(recheck)
	defer tick.Stop()
	for {
		woke, werr := false, error(nil)
		select {
		case <-wctx.Done():
		case werr = <-ended:
			woke = true
		case <-tick.C:
		}
		if err := ctx.Err(); err != nil {
			return run, fmt.Errorf("wait for run %s: %w", run.ID, err)
		}
		// ctx, not wctx: a wait that just ended still reads the status
		// it answers with.
		if run, err = r.Run(ctx, tenant, runID); err != nil || run.Status.Final() || wctx.Err() != nil {
			return run, err
		}
		var ended *temporal.WorkflowExecutionError
		switch {
		case !woke:
		case werr == nil || errors.As(werr, &ended):
			// The workflow ended without recording its run: nothing but
			// the reconciler will change its row now.
			return run, nil
		default:
			return run, fmt.Errorf("wait for run %s: %w", run.ID, werr)
		}
	}
}

// Result is a run as its readers answer it.
type Result struct {
	Run     store.Run
	Outcome contract.Outcome
	// Handoff is a committed run's fresh-session conversation, when it
	// made one.
	Handoff json.RawMessage
	// Conversation is a committed run's compacted conversation, when it
	// was asked for.
	Conversation json.RawMessage
}

// Final reports whether the run has ended.
func (res Result) Final() bool { return res.Run.Status.Final() }

// Result builds the answer of run, a row Run or Wait returned: its
// outcome (from its row and stats), and, once it committed, its handoff
// and (withConversation) its compacted conversation, each read from S3
// after its key is checked to be the run's tenant's and checked against
// its recorded SHA-256.
func (r *Reader) Result(ctx context.Context, run store.Run, withConversation bool) (Result, error) {
	o, err := run.Outcome()
	if err != nil {
		return Result{}, err
	}
	res := Result{Run: run, Outcome: o}
	if !run.Status.Committed() {
		return res, nil
	}
	if o.HandoffKey != "" {
		if res.Handoff, err = r.Audit.Verified(ctx, run.Tenant, o.HandoffKey, o.HandoffSHA256); err != nil {
			return Result{}, fmt.Errorf("run %s handoff: %w", run.ID, err)
		}
	}
	if withConversation {
		if res.Conversation, err = r.Audit.OutputOf(ctx, run); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

// Part is a conversation of a run a download reads.
type Part string

// The parts of a run.
const (
	// Original is the conversation as it was submitted, byte for byte.
	Original Part = "original"
	// Output is a committed run's compacted conversation.
	Output Part = "output"
	// Handoff is the fresh-session conversation a run made.
	Handoff Part = "handoff"
)

// Download is one conversation of a run, byte for byte.
type Download struct {
	Run  store.Run
	Part Part
	Data []byte
}

// Filename is the download's file name: "<run>-<part>.json".
func (d Download) Filename() string { return d.Run.ID + "-" + string(d.Part) + ".json" }

// Download reads part of tenant's run runID, checked against the
// SHA-256 recorded for it. A run without that part is audit.ErrNoArchive,
// audit.ErrNoOutput (any run that did not commit) or ErrNoHandoff, and
// the Download returned with the error still names the run.
func (r *Reader) Download(ctx context.Context, tenant, runID string, part Part) (Download, error) {
	run, err := r.Run(ctx, tenant, runID)
	if err != nil {
		return Download{}, err
	}
	d := Download{Run: run, Part: part}
	switch part {
	case Original:
		d.Data, err = r.Audit.OriginalOf(ctx, run)
	case Output:
		if !run.Status.Committed() {
			return d, fmt.Errorf("run %s (%s): %w", run.ID, run.Status, audit.ErrNoOutput)
		}
		d.Data, err = r.Audit.OutputOf(ctx, run)
	case Handoff:
		o, oerr := run.Outcome()
		switch {
		case oerr != nil:
			return d, oerr
		case !run.Status.Committed() || o.HandoffKey == "":
			return d, fmt.Errorf("run %s: %w", run.ID, ErrNoHandoff)
		}
		if d.Data, err = r.Audit.Verified(ctx, tenant, o.HandoffKey, o.HandoffSHA256); err != nil {
			err = fmt.Errorf("run %s handoff: %w", run.ID, err)
		}
	default:
		return d, fmt.Errorf("run %s: no part %q", run.ID, part)
	}
	return d, err
}

// Write answers data byte for byte with status 200: its Content-Type,
// its Content-Length, its hex SHA-256 in X-Content-SHA256 (for the caller
// to check what it got) and, when name is not empty, a
// Content-Disposition that saves it as the file name.
func Write(w http.ResponseWriter, contentType, name string, data []byte) {
	sum := sha256.Sum256(data)
	h := w.Header()
	h.Set("Content-Type", contentType)
	if name != "" {
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	}
	h.Set("X-Content-SHA256", hex.EncodeToString(sum[:]))
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// Status is how every surface answers a read's error:
// http.StatusGone for a session that was erased or is being erased (a
// *store.SessionGoneError, which names the erasure), http.StatusNotFound
// for a run, session or id the tenant does not have (another tenant's
// included: the two answers are one) and for a run without the
// conversation asked for (Missing says which), 0 for any other error,
// which is the surface's to answer.
func Status(err error) int {
	var gone *store.SessionGoneError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &gone):
		return http.StatusGone
	case errors.Is(err, ErrNotFound), Missing(err) != "":
		return http.StatusNotFound
	}
	return 0
}

// Missing says, for a run that exists but lacks the conversation asked
// for, why, in words a caller can be shown; "" for any other error.
func Missing(err error) string {
	switch {
	case errors.Is(err, audit.ErrNoArchive):
		return "this run has no archived original (it failed before archiving)"
	case errors.Is(err, audit.ErrNoOutput):
		return "this run has no output (it did not commit one)"
	case errors.Is(err, ErrNoHandoff):
		return "this run has no handoff (only a run that ends CRITICAL, over its limit or at a checkpoint makes one)"
	}
	return ""
}
