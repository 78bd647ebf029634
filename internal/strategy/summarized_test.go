package strategy

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// TestSummarizedMessagesAreWhatCompactDrops: the list is exactly the
// messages Compact replaces (protected ones and their pairs are kept).
func TestSummarizedMessagesAreWhatCompactDrops(t *testing.T) {
	t.Parallel()
	c := conv(conversation.FormatAnthropic,
		sysMsg("You are a sales analyst."),
		userMsg("Can you analyze the latest sales data?"),
		asstMsg("I'll fetch the sales data from the database.", use("q1", "database_query", "{}")),
		userResults(result("q1", "[1000 rows of data...]")),
		userMsg("IMPORTANT: only use EUR amounts."),
		asstMsg("Here's the analysis: ..."),
		userMsg("What about Q3 specifically?"),
		asstMsg("Let me filter for Q3...", use("q2", "database_query", `{"quarter":3}`)),
		userResults(result("q2", "[300 rows...]")),
		asstMsg("Q3 shows..."),
		userMsg("Compare to Q2?"),
		asstMsg("I'll fetch Q2 data..."),
	)
	mask := Protected(c, Protection{System: true, LastN: 3, PinMarkers: DefaultPinMarkers})
	split := SplitPoint(c, 3, mask)
	got := SummarizedMessages(c, split, mask)
	require.Equal(t, []int{1, 2, 3, 5, 6, 7, 8}, got)
	out, stats, err := Compact(c, split, "summary", StyleSummaryFirst, mask)
	require.NoError(t, err)
	require.Len(t, got, stats.Summarized)
	kept := map[string]bool{}
	for _, m := range out.Messages {
		kept[fmt.Sprint(m)] = true
	}
	for _, i := range got {
		require.False(t, kept[fmt.Sprint(c.Messages[i])], "message %d is dropped", i)
	}
	require.Nil(t, SummarizedMessages(c, 0, mask), "split inside the system head")
	require.Nil(t, SummarizedMessages(c, len(c.Messages)+1, mask))
	require.Nil(t, SummarizedMessages(c, split, []bool{true}), "a mask of another conversation")
}

// TestTruncatedInputsNameTheirRecoverID: with RecoverID the reference
// names the id of the original input, for the call's own position.
func TestTruncatedInputsNameTheirRecoverID(t *testing.T) {
	t.Parallel()
	c := truncateConv(bigText(100))
	var asked [][2]int
	out, stats, err := TruncateInputs(c, charCounter{}, TruncateOptions{MinTokens: 100, Protected: Protected(c, Protection{LastN: 2}),
		RecoverID: func(msg, block int) string {
			asked = append(asked, [2]int{msg, block})
			return fmt.Sprintf("sha.m%db%d", msg, block)
		}})
	require.NoError(t, err)
	require.Equal(t, 2, stats.Count)
	require.Equal(t, [][2]int{{1, 1}, {5, 1}}, asked)
	var in truncatedInput
	require.NoError(t, json.Unmarshal([]byte(out.Messages[1].Blocks[1].Input), &in))
	require.Contains(t, in.Truncated, "**Status:** Content persisted to disk\n**Recover:** the full input with the recover_context tool, id: sha.m1b1")
}
