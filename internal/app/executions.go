package app

import (
	"context"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// temporalExecutions deletes workflow executions through the frontend's
// DeleteWorkflowExecution (activities.ExecutionDeleter): an erased
// session's identifiers leave Temporal's histories and visibility too.
type temporalExecutions struct {
	client client.Client
}

// DeleteExecutions deletes the latest execution of each workflow id; an
// id with none is skipped. A running one is terminated and deleted.
func (t temporalExecutions) DeleteExecutions(ctx context.Context, namespace string, workflowIDs []string) (int, error) {
	n := 0
	for _, id := range workflowIDs {
		_, err := t.client.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
			Namespace: namespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id}})
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &notFound):
		case err != nil:
			return n, fmt.Errorf("delete workflow execution %s: %w", id, err)
		default:
			n++
		}
	}
	return n, nil
}
