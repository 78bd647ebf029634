package contract_test

import (
	"fmt"

	"github.com/ctxcompact/orchestrator/contract"
)

// A session's workflow id names its tenant and its session, so that one
// session's events go to one workflow; a name Temporal's headers cannot
// carry as it is is percent-encoded under another prefix.
func ExampleSessionWorkflowID() {
	fmt.Println(contract.SessionWorkflowID("acme", "s-42"))
	fmt.Println(contract.SessionWorkflowID("acme", "été"))
	// Output:
	// session/acme/s-42
	// session-u/acme/%C3%A9t%C3%A9
}

// Which triggers the service decides on (a platform's threshold event,
// the proxy's) and which a caller asks for.
func ExampleAutomatic() {
	for _, trigger := range []string{"threshold", "proxy", "manual", "checkpoint"} {
		fmt.Println(trigger, contract.Automatic(trigger))
	}
	// Output:
	// threshold true
	// proxy true
	// manual false
	// checkpoint false
}
