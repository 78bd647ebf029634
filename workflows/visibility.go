package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/contract"
)

// runSearchAttributes are a run's attributes at its start.
func runSearchAttributes(in contract.CompactionInput) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(contract.SATenant.ValueSet(in.Run.Tenant), contract.SASession.ValueSet(in.Run.Session),
		contract.SAPreset.ValueSet(in.Run.Preset), contract.SAOutcome.ValueSet("running"))
}

// recordOutcome sets the run's outcome attribute and a memo of its figures
// (no conversation text), for runs that asked for visibility.
func recordOutcome(ctx workflow.Context, in contract.CompactionInput, outcome string, res contract.Outcome) {
	if !in.Visibility {
		return
	}
	logger := workflow.GetLogger(ctx)
	if err := workflow.UpsertTypedSearchAttributes(ctx, contract.SAOutcome.ValueSet(outcome)); err != nil {
		logger.Warn("set outcome search attribute", "run", in.Run.ID, "error", err)
	}
	memo := map[string]any{
		"outcome": outcome, "format": res.Format, "unit": res.Unit, "tokens_before": res.TokensBefore,
		"tokens_after": res.TokensAfter, "ratio": res.Ratio, "level_before": res.LevelBefore,
		"level_after": res.LevelAfter, "drift": res.Drift, "over_limit": res.OverLimit,
	}
	if err := workflow.UpsertMemo(ctx, memo); err != nil {
		logger.Warn("set memo", "run", in.Run.ID, "error", err)
	}
}
