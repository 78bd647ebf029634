package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"
)

// historyCost is what a workflow's event history says it cost: its events,
// and the billable actions Temporal Cloud's mapping gives them (an
// estimate from the history, as the Cloud's own history view makes it).
type historyCost struct {
	events  int
	actions int
	bytes   int // the history's encoded size, what Temporal stores
}

// costOf counts a history's events and estimates its billable actions
// after Temporal Cloud's published mapping: a workflow started, each
// activity scheduled (and each retry, counted by attempt), each timer
// started, each signal received, each child workflow started, each
// search-attribute upsert, and the local activities of one workflow task
// as one action (their markers share the task's completion).
func costOf(h *historypb.History) historyCost {
	c := historyCost{events: len(h.GetEvents()), bytes: proto.Size(h)}
	markerTask := int64(-1) // the workflow task completion whose markers were counted
	lastCompleted := int64(0)
	for _, e := range h.GetEvents() {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
			enumspb.EVENT_TYPE_TIMER_STARTED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
			enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
			enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			c.actions++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			// One action per attempt: the started event of a retried
			// activity carries the attempt it was.
			c.actions += max(1, int(e.GetActivityTaskStartedEventAttributes().GetAttempt()))
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			lastCompleted = e.GetEventId()
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if e.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" && markerTask != lastCompleted {
				markerTask = lastCompleted
				c.actions++
			}
		}
	}
	return c
}

// readHistory reads the whole history of workflow id.
func readHistory(ctx context.Context, c client.Client, id string) (*historypb.History, error) {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", id, err)
		}
		h.Events = append(h.Events, e)
	}
	return h, nil
}

// workflowCost reads the history of workflow id and returns its cost.
func workflowCost(ctx context.Context, c client.Client, id string) (historyCost, error) {
	h, err := readHistory(ctx, c, id)
	if err != nil {
		return historyCost{}, err
	}
	return costOf(h), nil
}

// meanCost is the mean history events, billable actions and history
// bytes of the workflows ids; zeros for none.
func meanCost(ctx context.Context, c client.Client, ids []string) (events, actions, bytes float64, err error) {
	if len(ids) == 0 {
		return 0, 0, 0, nil
	}
	var e, a, b int
	for i, id := range ids {
		h, err := readHistory(ctx, c, id)
		if err != nil {
			return 0, 0, 0, err
		}
		if verbose && i == 0 {
			fmt.Fprintf(os.Stderr, "bench: 1. history of %s: %s\n", id, historyShape(h))
		}
		cost := costOf(h)
		e, a, b = e+cost.events, a+cost.actions, b+cost.bytes
	}
	n := float64(len(ids))
	return float64(e) / n, float64(a) / n, float64(b) / n, nil
}

// historyShape writes a history's events in order, each as its type
// without the EVENT_TYPE_ prefix and, for an activity scheduled or a
// local activity's marker, the activity: what -v shows of one run, so
// that what adds events to a run can be read.
func historyShape(h *historypb.History) string {
	var b strings.Builder
	for i, e := range h.GetEvents() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strings.TrimPrefix(e.GetEventType().String(), "EVENT_TYPE_"))
		switch {
		case e.GetActivityTaskScheduledEventAttributes() != nil:
			b.WriteString("(" + e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() + ")")
		case e.GetMarkerRecordedEventAttributes() != nil:
			b.WriteString("(" + e.GetMarkerRecordedEventAttributes().GetMarkerName() + ")")
		}
	}
	return b.String()
}
