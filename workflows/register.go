package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
)

// Register puts every workflow and activity on a worker: the one place
// that lists them. Each activity struct registers its methods under their
// names, which every recorded history holds.
func Register(r worker.Registry, set activities.Set) {
	// Under the contract's names, which the gateway starts them by.
	r.RegisterWorkflowWithOptions(Compaction, workflow.RegisterOptions{Name: contract.CompactionWorkflow})
	r.RegisterWorkflowWithOptions(Session, workflow.RegisterOptions{Name: contract.SessionWorkflow})
	r.RegisterWorkflowWithOptions(WebhookDelivery, workflow.RegisterOptions{Name: contract.DeliveryWorkflow})
	r.RegisterWorkflowWithOptions(SessionErasure, workflow.RegisterOptions{Name: contract.EraseWorkflow})
	r.RegisterWorkflowWithOptions(RetentionSweep, workflow.RegisterOptions{Name: contract.RetentionWorkflow})
	r.RegisterActivity(set.Compaction)
	r.RegisterActivity(set.Erasure)
	r.RegisterActivity(set.Delivery)
	r.RegisterActivity(set.Admission)
}

// RegisterLLM puts the activities on the worker of the LLM task queue,
// which runs only the summarizer calls the workflows send there.
func RegisterLLM(r worker.Registry, a *activities.Activities) {
	r.RegisterActivity(a)
}
