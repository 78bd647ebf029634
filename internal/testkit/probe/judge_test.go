package probe

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/policy"
)

func TestQuestionsAndPrompt(t *testing.T) {
	t.Parallel()
	set := Derive(realChat(t), policy.DefaultPinMarkers())
	qs := Questions(set)
	cats := map[string]bool{}
	for _, q := range qs {
		cats[q.Category] = true
		require.NotEmpty(t, q.Reference)
	}
	require.Len(t, cats, 4, "all four categories")
	asked := Prompt(qs, false)
	require.NotContains(t, asked, "Reference", "the agent never sees the references")
	require.Contains(t, asked, "1. [recall]")
	graded := Prompt(qs, true)
	require.Contains(t, graded, set.Artifacts[0])
	require.Equal(t, len(qs), strings.Count(graded, "Reference:"))

	require.Empty(t, Questions(Set{}), "nothing to ask of an empty set")
}

func TestParseGrades(t *testing.T) {
	t.Parallel()
	cases := []struct {
		text    string
		n       int
		want    []int
		wantErr string
	}{
		{"1: 5\n2: 3\n3: 0", 3, []int{5, 3, 0}, ""},
		{"Grades:\n 2. 4\n1) 5", 2, []int{5, 4}, ""},
		{"1: 5\n3: 2", 3, nil, "no grade for question 2"},
		{"1: 5\n1: 4", 1, nil, "question 1 graded twice"},
		{"4: 5", 3, nil, "grade for question 4"},
		{"all good", 1, nil, "no grade for question 1"},
	}
	for _, tc := range cases {
		got, err := ParseGrades(tc.text, tc.n)
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, tc.text)
			continue
		}
		require.NoError(t, err, tc.text)
		require.Equal(t, tc.want, got)
	}
	qs := []Question{{Category: CategoryRecall}, {Category: CategoryRecall}, {Category: CategoryArtifact}}
	require.Equal(t, map[string]float64{CategoryRecall: 4, CategoryArtifact: 1}, ByCategory(qs, []int{5, 3, 1}))
}
