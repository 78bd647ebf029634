package workflows

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Typed search attributes of the workflows, so that operators find runs in
// Temporal by what they mean (`temporal workflow list --query
// 'CompactionTenant="acme" and CompactionOutcome="over_limit"'`). They must
// be registered once per namespace (SearchAttributes lists them; the dev
// stack and the tests register them, production runs the documented
// `temporal operator search-attribute create` commands) and are set only
// on runs whose input asks for them (CompactionInput.Visibility).
var (
	SATenant  = temporal.NewSearchAttributeKeyKeyword("CompactionTenant")
	SASession = temporal.NewSearchAttributeKeyKeyword("CompactionSession")
	SAPreset  = temporal.NewSearchAttributeKeyKeyword("CompactionPreset")
	SAOutcome = temporal.NewSearchAttributeKeyKeyword("CompactionOutcome")
)

// SearchAttributes lists the search attributes to register, by name.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		SATenant.GetName():  enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SASession.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAPreset.GetName():  enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAOutcome.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}
}

// SessionSearchAttributes are a session workflow's attributes.
func SessionSearchAttributes(tenant, session string) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(SATenant.ValueSet(tenant), SASession.ValueSet(session))
}

// runSearchAttributes are a run's attributes at its start.
func runSearchAttributes(in CompactionInput) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(SATenant.ValueSet(in.Run.Tenant), SASession.ValueSet(in.Run.Session),
		SAPreset.ValueSet(in.Run.Preset), SAOutcome.ValueSet("running"))
}

// recordOutcome sets the run's outcome attribute and a memo of its figures
// (no conversation text), for runs that asked for visibility.
func recordOutcome(ctx workflow.Context, in CompactionInput, outcome string, res CompactionResult) {
	if !in.Visibility {
		return
	}
	logger := workflow.GetLogger(ctx)
	if err := workflow.UpsertTypedSearchAttributes(ctx, SAOutcome.ValueSet(outcome)); err != nil {
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
