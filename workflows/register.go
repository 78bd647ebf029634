package workflows

import (
	"go.temporal.io/sdk/worker"

	"github.com/ctxcompact/orchestrator/activities"
)

// Register puts every workflow and activity on a worker: the one place
// that lists them.
func Register(r worker.Registry, a *activities.Activities) {
	r.RegisterWorkflow(Compaction)
	r.RegisterWorkflow(Session)
	r.RegisterActivity(a)
}

// RegisterLLM puts the activities on the worker of the LLM task queue,
// which runs only the summarizer calls the workflows send there.
func RegisterLLM(r worker.Registry, a *activities.Activities) {
	r.RegisterActivity(a)
}
