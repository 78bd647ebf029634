package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ctxcompact/orchestrator/internal/gateway"
)

// TestStepsAreLocalAndSummariesUseTheLLMQueue checks the shape of a run on
// the server: the S3/Postgres steps are local activities (markers in the
// history, no activity tasks), and every activity task is a summarizer
// call on the LLM task queue, where the queue-wide rate limit holds.
func TestStepsAreLocalAndSummariesUseTheLLMQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	input := readData(t, "swe-agent-deepseek/django__django-11564.json")
	sub, res := e.compact(gateway.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
	checkRun(t, e, input, sub, res)

	h := fetchHistory(t, e.client, sub.RunID)
	scheduled, markers := 0, 0
	for _, ev := range h.Events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := ev.GetActivityTaskScheduledEventAttributes()
			require.Equal(t, "Summarize", a.GetActivityType().GetName(), "only summarizer calls are activity tasks")
			require.Equal(t, e.llmQueue, a.GetTaskQueue().GetName(), "summarizer calls go to the LLM task queue")
			scheduled++
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if ev.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" {
				markers++
			}
		}
	}
	require.GreaterOrEqual(t, scheduled, 1, "the history summary is an activity")
	require.GreaterOrEqual(t, markers, 7, "plan, archive, deterministic, prepare, drift, apply and commit ran as local activities")
}
