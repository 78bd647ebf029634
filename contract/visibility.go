package contract

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
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
