package strategy

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

func TestProtected(t *testing.T) {
	t.Parallel()
	// 0 system, 1 task, 2 call, 3 result, 4 pinned user, 5 call(a,b),
	// 6 result a, 7 result b, 8 assistant text, 9 user with IMPORTANT
	// inside a tool result only, 10 answer.
	c := conv(conversation.FormatOpenAI,
		sysMsg("You are an agent."),
		userMsg("Task: fix the parser."),
		asstMsg("Reading.", use("c1", "read_file", `{"path":"p.go"}`)),
		toolMsg("c1", "package p"),
		userMsg("<constraints>Do not touch the tests.</constraints>"),
		asstMsg("", use("c2", "bash", `{"command":"ls"}`), use("c3", "bash", `{"command":"pwd"}`)),
		toolMsg("c2", "a b"),
		toolMsg("c3", "IMPORTANT: /src"),
		asstMsg("Thinking."),
		userResults(result("x", "IMPORTANT: not a pin")),
		asstMsg("Done."),
	)
	// Message 9 is an orphan result on purpose: it must not be pinned by
	// text inside a tool result.
	tests := []struct {
		name string
		p    Protection
		want []int
	}{
		{"nothing", Protection{}, nil},
		{"system", Protection{System: true}, []int{0}},
		{"first user is the task, not a later one", Protection{FirstUser: true}, []int{1}},
		{"pin markers in user text only", Protection{PinMarkers: DefaultPinMarkers}, []int{4}},
		{"empty markers pin nothing", Protection{PinMarkers: []string{""}}, nil},
		{"last N", Protection{LastN: 2}, []int{9, 10}},
		{"a protected result protects its call and the call's other results", Protection{LastN: 4}, []int{5, 6, 7, 8, 9, 10}},
		{"last N larger than the conversation", Protection{LastN: 50}, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"the auto-summarize design set", Protection{System: true, FirstUser: true, LastN: 3, PinMarkers: DefaultPinMarkers}, []int{0, 1, 4, 8, 9, 10}},
		{"the active state checkpoint: the latest checkpoint call and its result", Protection{CheckpointTools: []string{"read_file"}}, []int{2, 3}},
		{"a checkpoint tool never called protects nothing", Protection{CheckpointTools: []string{"compress_to_checkpoint"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mask := Protected(c, tt.p)
			require.Len(t, mask, len(c.Messages))
			var got []int
			for i, p := range mask {
				if p {
					got = append(got, i)
				}
			}
			require.Equal(t, tt.want, got)
		})
	}

	// Anthropic: the first user message may be bare tool results when a
	// conversation was cut; the task is the first user message with text.
	a := conv(conversation.FormatAnthropic,
		asstMsg("", use("t1", "bash", "{}")),
		userResults(result("t1", "out")),
		userMsg("The real task."),
	)
	require.Equal(t, []bool{false, false, true}, Protected(a, Protection{FirstUser: true}))
	// Protecting a call protects its result.
	require.Equal(t, []bool{true, true, false}, closePairs(a, indexTools(a), []bool{true, false, false}))
}

func TestIsProtected(t *testing.T) {
	t.Parallel()
	require.False(t, isProtected(nil, 3), "nil protects nothing")
	require.True(t, isProtected([]bool{false}, 3), "a short mask protects what it does not cover")
	require.False(t, isProtected([]bool{false, false}, 1))
	c := conv(conversation.FormatOpenAI, userMsg("a"), userMsg("b"))
	require.NoError(t, checkMask(c, nil))
	require.NoError(t, checkMask(c, []bool{true, false}))
	require.ErrorContains(t, checkMask(c, []bool{true}), "1 entries for 2 messages")
}
