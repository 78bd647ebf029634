package activities

import (
	"context"
	"fmt"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
)

// FitBudget runs one deterministic step of the budget ladder that closes
// every run (see plan.LadderOffload and plan.LadderTruncate): it changes
// the working conversation only while it is over the ladder's goal.
func (a *Activities) FitBudget(ctx context.Context, in FitInput) (res FitResult, err error) {
	rec := a.begin(ctx, in.Run, "budget/"+in.Stage, "budget")
	defer rec.end(&err, &res.Recorded)

	run := in.Run
	conv, p, b, err := a.loadWork(ctx, rec, run, in.WorkKey)
	if err != nil {
		return res, err
	}
	if floor := plan.Floor(conv, p, b); b.Over(floor) {
		// Nothing the ladder may cut would bring it under: leave the
		// conversation as it is rather than cut it for nothing.
		res = FitResult{WorkKey: in.WorkKey, Tokens: b.Measure(conv), AboveGoal: true, Hopeless: true,
			Pass: PassStat{Name: "budget/" + in.Stage, Note: fmt.Sprintf("skipped: what no step may cut is %d of limit %d", floor, b.Limit)}}
		rec.outputSize = int64(res.Tokens)
		return res, nil
	}
	out, pass, err := a.fitStage(ctx, in, conv, p, b)
	if err != nil {
		return res, err
	}
	res.WorkKey = in.WorkKey
	if pass.Applied {
		if res.WorkKey, err = a.save(ctx, run, out); err != nil {
			return res, err
		}
	}
	size := b.Measure(out)
	res.Tokens, res.Pass = size, PassStat(pass)
	res.AboveGoal = size > plan.LadderGoal(p, b)
	// A ReAct trajectory never drops a turn, so the ladder's history step
	// does not apply to it.
	res.HistoryAllowed = out.Format != conversation.FormatReAct
	logger(ctx).Info("budget ladder", "run", run.ID, "stage", in.Stage, "applied", pass.Applied, "count", pass.Count, "size", size, "limit", b.Limit)
	rec.outputSize = int64(size)
	return res, nil
}

// fitStage runs the ladder stage the input names on conv, storing what it
// offloads.
func (a *Activities) fitStage(ctx context.Context, in FitInput, conv conversation.Conversation, p policy.Preset, b plan.Budget) (conversation.Conversation, plan.Pass, error) {
	run := in.Run
	switch in.Stage {
	case FitOffload:
		return a.fitOffloading(ctx, run, plan.FitOffload, conv, p, b)
	case FitTruncate:
		// Each note names the id of the whole result in the original.
		var ids func(msg, block int) string
		m, ok, err := a.recoverMap(ctx, run, in.ArchiveKey, conv)
		if err != nil {
			return conversation.Conversation{}, plan.Pass{}, err
		}
		if ok {
			ids = blockIDs(m)
		}
		return plan.FitTruncateWith(conv, p, b, in.ArchiveKey, ids)
	case FitRelieve:
		return a.fitOffloading(ctx, run, plan.FitRelieve, conv, p, b)
	case FitOffloadSmall:
		return a.fitOffloading(ctx, run, plan.FitOffloadSmall, conv, p, b)
	default:
		return conversation.Conversation{}, plan.Pass{}, config(fmt.Errorf("unknown budget stage %q", in.Stage))
	}
}

// offloadFit is a ladder stage that offloads (plan.FitOffload,
// plan.FitRelieve, plan.FitOffloadSmall).
type offloadFit func(conversation.Conversation, policy.Preset, plan.Budget, func(string) string) (conversation.Conversation, plan.Pass, []plan.Offload, error)

// fitOffloading runs an offloading stage and stores its offloads.
func (a *Activities) fitOffloading(ctx context.Context, run contract.Run, fit offloadFit, conv conversation.Conversation, p policy.Preset, b plan.Budget) (conversation.Conversation, plan.Pass, error) {
	out, pass, offloads, err := fit(conv, p, b, offloadKey(run.Tenant))
	if err != nil {
		return out, pass, err
	}
	if err := a.storeOffloads(ctx, run, offloads); err != nil {
		return out, pass, err
	}
	return out, pass, nil
}
