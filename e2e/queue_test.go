package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ctxcompact/orchestrator/internal/gateway"
)

// TestStepsAreLocalAndSummariesUseTheLLMQueue checks the shape of a run on
// the server: the S3/Postgres steps up to the commit are local activities
// (markers in the history, no activity tasks), every summarizer call is an
// activity task on the LLM task queue, where the queue-wide rate limit
// holds, and the other activity tasks, on the run's own queue, are the
// release of the intermediates after the commit is recorded and, when the
// history summary failed its first drift check, its deterministic
// replacement made beside the repair.
func TestStepsAreLocalAndSummariesUseTheLLMQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	input := readData(t, "swe-agent-deepseek/django__django-11564.json")
	sub, res := e.compact(gateway.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
	checkRun(t, e, input, sub, res)

	h := fetchHistory(t, e.client, sub.RunID)
	scheduled, markers, released, replacements := 0, 0, 0, 0
	for _, ev := range h.Events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := ev.GetActivityTaskScheduledEventAttributes()
			switch a.GetActivityType().GetName() {
			case "ReleaseIntermediates":
				require.Equal(t, e.taskQueue, a.GetTaskQueue().GetName(), "the release runs on the run's own queue")
				released++
				continue
			case "Fallback":
				// The deterministic replacement made beside a repair's
				// summarizer call (docs/architecture.md), when the
				// summary failed its first drift check.
				require.Equal(t, e.taskQueue, a.GetTaskQueue().GetName(), "the replacement runs on the run's own queue")
				replacements++
				continue
			}
			require.Equal(t, "Summarize", a.GetActivityType().GetName(), "only summarizer calls, the release and a replacement beside a repair are activity tasks")
			require.Equal(t, e.llmQueue, a.GetTaskQueue().GetName(), "summarizer calls go to the LLM task queue")
			scheduled++
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if ev.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" {
				markers++
			}
		}
	}
	require.GreaterOrEqual(t, scheduled, 1, "the history summary is an activity")
	require.Equal(t, 1, released, "the intermediates are released once, as an activity task")
	require.LessOrEqual(t, replacements, 1, "at most one replacement for the run's one history summary")
	require.GreaterOrEqual(t, markers, 6, "plan (with the archive), deterministic, prepare, drift, apply and commit ran as local activities")
}

// TestLLMRateLimitSpreadsABurst runs a map-reduce whose chunk summaries
// would all start at once (parallelism 8, an instant summarizer) under a
// queue-wide limit of 2 calls per second. Unlimited, its 20-odd calls all
// start within a second or two; limited, no 2-second window holds more
// than the 4 calls the limit allows plus the server's initial burst of 4.
func TestLLMRateLimitSpreadsABurst(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withLLMRate(2))
	input := reactFromOpenAI(t, withHugeResult(t, readData(t, "swe-agent-deepseek/django__django-11742.json"), 30, hugeText(t)))
	sub, res := e.compact(gateway.Event{Preset: "react-two-layer", Conversation: input})
	checkRun(t, e, input, sub, res)

	calls := e.llm.Calls()
	require.Greater(t, len(calls), 8, "more calls than one window may hold")
	starts := make([]time.Time, len(calls))
	for i, c := range calls {
		starts[i] = c.At
	}
	slices.SortFunc(starts, time.Time.Compare)
	for i := range starts {
		inWindow := 0
		for _, at := range starts[i:] {
			if at.Sub(starts[i]) < 2*time.Second {
				inWindow++
			}
		}
		require.LessOrEqual(t, inWindow, 8, "calls starting within 2 s of call %d", i)
	}
}
