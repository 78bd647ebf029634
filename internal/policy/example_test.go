package policy_test

import (
	"encoding/json"
	"fmt"

	"github.com/ctxcompact/orchestrator/internal/policy"
)

// A preset is resolved once, from its name and the caller's overrides; a
// field the caller may not set, or a value out of range, is an error
// naming it.
func ExampleResolve() {
	p, err := policy.Resolve("three-tier", json.RawMessage(`{"history":{"target_tokens":1500}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Name, p.History.TargetTokens, p.Drift.Enabled)

	_, err = policy.Resolve("no-such-preset", nil)
	fmt.Println(err != nil)
	// Output:
	// three-tier 1500 true
	// true
}

// The built-in presets: one per source design, then the product's own.
func ExampleNames() {
	fmt.Println(policy.Names())
	// Output:
	// [react-two-layer watermark offload-compact auto-summarize three-tier adaptive]
}
