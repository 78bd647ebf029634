package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"
)

func event(id int64, t enumspb.EventType, set func(*historypb.HistoryEvent)) *historypb.HistoryEvent {
	e := &historypb.HistoryEvent{EventId: id, EventType: t}
	if set != nil {
		set(e)
	}
	return e
}

func marker(id int64) *historypb.HistoryEvent {
	return event(id, enumspb.EVENT_TYPE_MARKER_RECORDED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{
			MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{MarkerName: "LocalActivity"}}
	})
}

// TestCostOf: the action mapping on a hand-made history, and on a
// recorded run.
func TestCostOf(t *testing.T) {
	t.Parallel()
	h := &historypb.History{Events: []*historypb.HistoryEvent{
		event(1, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil), // 1
		event(2, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, nil),
		marker(3), marker(4), // one action: the same workflow task
		event(5, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, nil),
		marker(6), // 1
		event(7, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{
				ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{Attempt: 3}}
		}), // 3 attempts
		event(8, enumspb.EVENT_TYPE_TIMER_STARTED, nil),               // 1
		event(9, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, nil), // 1
		event(10, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, nil),
	}}
	require.Equal(t, historyCost{events: 10, actions: 8, bytes: proto.Size(h)}, costOf(h))

	f, err := os.Open(filepath.Join("..", "..", "workflows", "testdata", "histories", "compaction-offload-compact.json"))
	require.NoError(t, err, "the recorded histories are in workflows/testdata")
	defer f.Close()
	rec, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	c := costOf(rec)
	require.Equal(t, len(rec.GetEvents()), c.events)
	require.GreaterOrEqual(t, c.actions, 3, "a start, local steps and a summarizer call")
	require.Less(t, c.actions, c.events)
}
