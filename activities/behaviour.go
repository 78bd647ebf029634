package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// behaviour is the three-tier design's post-compression check, run at
// the commit of the event after a compaction: what the agent did since
// the session's previous output (the run's input past that output's
// messages), against the task and the pending work that output's summary
// lists (plan.Behaviour). Each sign is recorded as a drift verdict of
// the run ("behaviour/<signal>", naming the message), and the warning to
// append at the output's tail is returned ("" when there is no sign).
// A replay moves nothing of its session, and checks nothing here.
func (a *Activities) behaviour(ctx context.Context, in CommitInput, p policy.Preset) ([]plan.BehaviourSignal, string, error) {
	run := in.Run
	if !p.Drift.Behaviour || run.ReplayOf != "" || in.ArchiveKey == "" {
		return nil, "", nil
	}
	prevOut, err := a.Store.LatestOutput(ctx, run.Tenant, run.Session)
	if errors.Is(err, store.ErrNotFound) {
		return nil, "", nil // the session's first run: no compaction before
	}
	if err != nil {
		return nil, "", storeErr(fmt.Errorf("read the session's latest output: %w", err))
	}
	prev, _, err := a.load(ctx, run.Tenant, prevOut.Key)
	if err != nil {
		return nil, "", err
	}
	cur, _, err := a.load(ctx, run.Tenant, in.ArchiveKey)
	if err != nil {
		return nil, "", err
	}
	signals := plan.Behaviour(prev, cur)
	if len(signals) == 0 {
		return nil, "", nil
	}
	verdicts := make([]store.Drift, 0, len(signals))
	for _, s := range signals {
		verdicts = append(verdicts, store.Drift{RunID: run.ID, Step: "behaviour/" + s.Name, Passed: false,
			Verdict: fmt.Sprintf("DRIFT_DETECTED: %s (message %d)", s.Note, s.Message)})
		a.Metrics.Drift("behaviour/"+s.Name, false)
	}
	if err := a.Store.RecordDrift(ctx, verdicts...); err != nil {
		return nil, "", storeErr(fmt.Errorf("record behaviour drift: %w", err))
	}
	return signals, plan.GoalDriftWarning(cur, signals), nil
}

// appendWarning appends the Goal Drift Warning at the tail of conv, as a
// user message from the service (after the stable prefix: nothing before
// it changes). It reports false, changing nothing, when the tail is a
// tool call still waiting for its result (the agent's host appends the
// result next; a message between them would break the pairing) or the
// format has no message list (ReAct).
func appendWarning(conv *conversation.Conversation, warning string) bool {
	if warning == "" || conv.Format == conversation.FormatReAct || len(conv.Messages) == 0 {
		return false
	}
	last := conv.Messages[len(conv.Messages)-1]
	for _, b := range last.Blocks {
		if b.Kind == conversation.KindToolUse {
			return false
		}
	}
	conv.Messages = append(conv.Messages, conversation.Message{Role: conversation.RoleUser,
		Blocks: []conversation.Block{{Kind: conversation.KindText, Text: warning}}})
	return true
}
