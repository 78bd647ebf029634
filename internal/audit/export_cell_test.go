package audit

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCSVCellsAreNotFormulas(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"=HYPERLINK(\"http://x\")": "'=HYPERLINK(\"http://x\")",
		"+1+1":                     "'+1+1",
		"-2+3":                     "'-2+3",
		"@SUM(A1)":                 "'@SUM(A1)",
		"\tcmd":                    "'\tcmd",
		"\rcmd":                    "'\rcmd",
		"session-1":                "session-1",
		"":                         "",
	} {
		require.Equal(t, want, cell(in), "%q", in)
	}
	row := csvRow(ExportRun{RunRecord: RunRecord{Session: "=cmd|' /C calc'!A0", TokensBefore: -1}})
	require.Equal(t, "'=cmd|' /C calc'!A0", row[2])
	require.Equal(t, "-1", row[10], "numbers are written as numbers")
}
