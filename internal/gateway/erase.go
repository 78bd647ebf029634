package gateway

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/idcheck"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// ErrSessionErasing refuses an event for a session whose erasure is under
// way: nothing new may land in what is being deleted. The claim decides
// it (store.SubmitRun), so it is the store's error.
var ErrSessionErasing = store.ErrSessionErasing

// EraseSession starts (or joins) the erasure of tenant's session, asked
// by requestedBy (an API key's id, an operator), and returns its
// tombstone and workflow id. store.ErrNotFound when the tenant has
// nothing of that session.
func (g *Gateway) EraseSession(ctx context.Context, tenant, session, requestedBy string) (store.Erasure, string, error) {
	if err := idcheck.Session(session); err != nil {
		return store.Erasure{}, "", &InputError{Field: "session", Err: err.(*idcheck.Error).Unnamed()}
	}
	e, _, err := g.Store.StartErasure(ctx, tenant, session, requestedBy)
	if err != nil {
		return store.Erasure{}, "", err
	}
	id := contract.EraseWorkflowID(e.ID)
	_, err = g.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: g.eraseQueue(), Priority: g.priority(tenant),
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING},
		contract.EraseWorkflow, contract.EraseInput{ErasureID: e.ID, Tenant: tenant, Session: session})
	if err != nil {
		return store.Erasure{}, "", fmt.Errorf("start erasure of session %s: %w", session, err)
	}
	return e, id, nil
}
