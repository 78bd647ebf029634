package offline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/drift"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/textcut"
	"github.com/stretchr/testify/require"
)

// openAIRun is the part of a real OpenAI chat file a transcript needs.
type openAIRun struct {
	Messages []struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
}

// loadRun reads a conversation of testdata/conversations (part of the
// repository: a missing file fails the test).
func loadRun(t testing.TB, name string) openAIRun {
	t.Helper()
	path := filepath.Join("../../testdata/conversations", name)
	raw, err := os.ReadFile(path)
	require.NoError(t, err, "test data %s", path)
	var run openAIRun
	require.NoError(t, json.Unmarshal(raw, &run))
	return run
}

// blockTranscript renders a run the way plan.Transcript does: a "[role]"
// block per text, "[assistant tool call NAME]" per call with its arguments
// verbatim, and "[tool tool result NAME]" per result.
func blockTranscript(run openAIRun) string {
	names := map[string]string{}
	var b strings.Builder
	for _, m := range run.Messages {
		if m.Role == "tool" {
			fmt.Fprintf(&b, "[tool tool result %s]\n%s\n\n", names[m.ToolCallID], m.Content)
			continue
		}
		if m.Content != "" {
			fmt.Fprintf(&b, "[%s]\n%s\n\n", m.Role, m.Content)
		}
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Function.Name
			fmt.Fprintf(&b, "[assistant tool call %s]\n%s\n\n", c.Function.Name, c.Function.Arguments)
		}
	}
	return b.String()
}

// toolCommands are the "command" arguments of a run's tool calls, in order.
func toolCommands(t testing.TB, run openAIRun) []string {
	t.Helper()
	var out []string
	for _, m := range run.Messages {
		for _, c := range m.ToolCalls {
			var args struct {
				Command string `json:"command"`
			}
			require.NoError(t, json.Unmarshal([]byte(c.Function.Arguments), &args))
			out = append(out, args.Command)
		}
	}
	return out
}

// headingsOverhead is what a layout's headings and the blank lines
// between its sections take: the most a summary may exceed its target by.
func headingsOverhead(level string, hs []string) int {
	n := len(hs) - 1
	for _, h := range hs {
		n += utf8.RuneCountInString(level + " " + h + "\n")
	}
	return n
}

// reAnyMarker is textcut's omission marker anywhere in a line.
var reAnyMarker = regexp.MustCompile(`\[… \d+ (lines?|chars) omitted …\]`)

// The real run of the structured tests: an SWE-agent (DeepSeek) run on
// django__django-11742 with 70 bash calls.
const realRun = "django__django-11742.json"

// The last five distinct errors of the run, the last lines of its
// tracebacks.
var realRunErrors = []string{
	"ModuleNotFoundError: No module named 'sqlparse'",
	"django.core.exceptions.ImproperlyConfigured: 'django.db.backends.dummy' isn't an available database backend.",
	"SyntaxError: unexpected character after line continuation character",
	"IndentationError: expected an indented block after function definition on line 295",
	"ModuleNotFoundError: No module named 'test_sqlite'",
}

var structuredPrompts = []struct {
	prompt, level string
	headings      []string
	files         string // the heading of the file list
}{
	{llm.PromptHistory, "##", HistorySections, "Code Changes"},
	{llm.PromptSession, "###", SessionSections, "Artifacts Created"},
	{llm.PromptBrief, "##", StructuredSections, "Files Touched"},
}

func TestStructuredOnRealRun(t *testing.T) {
	t.Parallel()
	run := loadRun(t, realRun)
	text := blockTranscript(run)
	commands := toolCommands(t, run)
	require.Len(t, commands, 70)
	for _, tc := range structuredPrompts {
		t.Run(tc.prompt, func(t *testing.T) {
			t.Parallel()
			const target = 8000
			req := llm.Request{Prompt: tc.prompt, Text: text, TargetChars: target, ArchiveRef: "s3://archive/django-11742"}
			resp, err := Summarizer{}.Summarize(context.Background(), req)
			require.NoError(t, err)
			out := resp.Text
			require.Equal(t, tc.headings, headings(out, tc.level), "every heading, in order")
			require.LessOrEqual(t, utf8.RuneCountInString(out), target+headingsOverhead(tc.level, tc.headings))

			// The artifact trail: every path any tool call names.
			files := bodyOf(out, tc.level, tc.files)
			for _, cmd := range commands {
				for _, id := range drift.Identifiers(cmd) {
					if id.Kind == drift.KindPath {
						require.Contains(t, files, id.Value, "a path of %q", cmd)
					}
				}
			}
			if tc.prompt == llm.PromptSession {
				require.Contains(t, files, "| __init__.py | ./django/db/models/fields/__init__.py | read, copied, written, git diff |")
				require.Contains(t, files, "| test_issue.py | test_issue.py | created, ran, written |")
			} else {
				require.Contains(t, files, "- ./django/db/models/fields/__init__.py: read, copied, written, git diff\n")
				require.Contains(t, files, "- patch.txt: created, read\n")
			}

			// The last five commands and errors, verbatim.
			for _, cmd := range commands[len(commands)-5:] {
				first, _, _ := strings.Cut(cmd, "\n")
				require.Contains(t, out, "- "+first, "a recent command")
			}
			require.Contains(t, out, "- cd /testbed && git diff -- ./django/db/models/fields/__init__.py > patch.txt → exit 0\n")
			require.Contains(t, out, "- echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt → no result")
			for _, e := range realRunErrors {
				require.Contains(t, out, "- "+e+" — ", "a recent error")
			}
			require.Contains(t, out, "- ModuleNotFoundError: No module named 'test_sqlite' — open (python -m django)\n")
			require.Contains(t, out, "- SyntaxError: unexpected character after line continuation character — resolved (python test_issue.py)\n")

			// The task's opening, and where the run stands.
			require.Contains(t, out, "- "+QuotePrefix+"Add check to ensure max_length fits longest choice.»\n", "the task, quoted as the user's words")
			require.Contains(t, out, "- "+QuotePrefix+"There is currently no check to ensure that Field.max_length is large enough to fit the longest value in Field.choices.»\n")
			require.Contains(t, out, "- The patch looks good. It shows the two changes:\n")
			require.Contains(t, out, "- Now let me submit the final output:")

			require.NotRegexp(t, reAnyMarker, out, "no omission markers")
			again, err := Summarizer{}.Summarize(context.Background(), req)
			require.NoError(t, err)
			require.Equal(t, out, again.Text, "deterministic")
		})
	}
}

func TestStructuredSmallTarget(t *testing.T) {
	t.Parallel()
	run := loadRun(t, realRun)
	text := blockTranscript(run)
	events, ok := parseEvents(text)
	require.True(t, ok)
	d := buildDigest(events)
	for _, tc := range structuredPrompts {
		t.Run(tc.prompt, func(t *testing.T) {
			t.Parallel()
			const target = 2000
			resp, err := Summarizer{}.Summarize(context.Background(), llm.Request{Prompt: tc.prompt, Text: text, TargetChars: target, ArchiveRef: "s3://a"})
			require.NoError(t, err)
			out := resp.Text
			require.Equal(t, tc.headings, headings(out, tc.level))
			require.LessOrEqual(t, utf8.RuneCountInString(out), target+headingsOverhead(tc.level, tc.headings))
			require.NotRegexp(t, reAnyMarker, out)
			// Everything else gave way first: every path the agent read,
			// wrote, ran or named in a call is still listed (only the
			// ones named elsewhere may be counted instead).
			files := bodyOf(out, tc.level, tc.files)
			named := 0
			for _, f := range d.files {
				if fileRank(f) == rankNamed {
					named++
					continue
				}
				listed := strings.Contains(files, "- "+f.path+": ") || strings.Contains(files, "| "+f.path+" |")
				require.True(t, listed, "path %s in\n%s", f.path, files)
			}
			if named == 0 {
				require.NotContains(t, files, "more path", "every path of this run is in a call of the agent's")
			}
			require.Contains(t, out, "Add check to ensure max_length fits longest choice.", "and the task's opening")
			require.Contains(t, out, "earlier decision", "the decisions were the first to go, and say so")
		})
	}
}

// TestStructuredTrimOrder shrinks the target step by step and checks that
// the parts give way in trimPhases' order: older decisions, older
// commands, the state, the constraints, the task past three lines,
// older errors (the last five kept); then the rest, the next step, the
// task's opening and, last of all, the files.
func TestStructuredTrimOrder(t *testing.T) {
	t.Parallel()
	events, _ := parseEvents(blockTranscript(loadRun(t, realRun)))
	d := buildDigest(events)
	// The recent calls share the state's section: counted per section,
	// they would count as state lines (their own order is in trimPhases).
	d.recent = nil
	full := map[int]int{partTask: len(d.task), partConstraints: len(d.constraints), partFiles: len(d.files),
		partCommands: len(d.commands), partErrors: len(d.errors), partDecisions: len(d.decisions),
		partState: len(d.state), partNext: len(d.next)}
	for p, n := range full {
		require.NotZero(t, n, "the run fills part %d", p)
	}
	acted := 0 // the files the agent read, wrote or ran, listed first
	for _, f := range d.files {
		if fileRank(f) < rankNamed {
			acted++
		}
	}
	overhead := headingsOverhead("##", StructuredSections)
	previous := ""
	for target := 12000; target >= 1000; target -= 100 {
		out := renderDigest(d, "##", structuredLayout(), target)
		require.LessOrEqual(t, utf8.RuneCountInString(out), target+overhead, "target %d", target)
		if out == previous {
			continue
		}
		previous = out
		kept := map[int]int{}
		for p, h := range StructuredSections {
			for _, l := range strings.Split(bodyOf(out, "##", h), "\n") {
				if strings.HasPrefix(l, "- ") && !strings.HasPrefix(l, "- (") {
					kept[p]++
				}
			}
		}
		cut := func(p int) bool { return kept[p] < full[p] }
		msg := fmt.Sprintf("target %d: kept %v of %v", target, kept, full)
		if cut(partCommands) {
			require.LessOrEqual(t, kept[partDecisions], keptDecisions, msg)
		}
		if cut(partState) || cut(partNext) {
			require.LessOrEqual(t, kept[partDecisions], keptDecisions, msg)
			require.LessOrEqual(t, kept[partCommands], verbatimCommands, msg)
		}
		if cut(partConstraints) {
			require.LessOrEqual(t, kept[partCommands], verbatimCommands, msg)
			require.LessOrEqual(t, kept[partState]+kept[partNext], 2, msg)
		}
		if cut(partTask) || cut(partFiles) {
			require.Zero(t, kept[partConstraints], msg)
		}
		if cut(partFiles) {
			// The paths the agent only named go after the task's
			// opening past three lines.
			require.LessOrEqual(t, kept[partTask], keptTaskLines, msg)
		}
		if cut(partErrors) {
			// The older errors give way after the constraints, the
			// task's opening past three lines and the paths only named.
			require.Zero(t, kept[partConstraints], msg)
			require.LessOrEqual(t, kept[partTask], keptTaskLines, msg)
			require.LessOrEqual(t, kept[partFiles], acted, msg)
		}
		if kept[partErrors] < min(verbatimErrors, full[partErrors]) {
			// The last five errors go only after the constraints and the
			// commands, the state and the decisions; the next step
			// outlasts them (a question the user has not answered is in
			// it).
			require.Zero(t, kept[partConstraints]+kept[partCommands]+kept[partState]+kept[partDecisions], msg)
		}
		if cut(partNext) && kept[partNext] == 0 {
			require.Zero(t, kept[partConstraints]+kept[partCommands]+kept[partState]+kept[partErrors]+kept[partDecisions], msg)
		}
		if kept[partTask] < min(keptTaskLines, full[partTask]) {
			require.Zero(t, kept[partConstraints]+kept[partCommands]+kept[partState]+kept[partNext]+kept[partErrors]+kept[partDecisions], msg)
		}
		if kept[partFiles] < acted {
			require.LessOrEqual(t, kept[partTask], 1, msg)
		}
	}
}

func TestStructuredFixtures(t *testing.T) {
	t.Parallel()
	// A run with an editor tool, a failing test fixed later, an error that
	// stays open, a read whose content mentions errors, and a last request.
	const text = `[system]
You are a coding agent.

[user]
Fix the flaky retry test in pkg/retry/retry_test.go.
You must not change the public API. Please keep commits small.

[assistant]
I will look at the test first because it fails only under load.

[assistant tool call bash]
{"command": "cat pkg/retry/retry_test.go"}

[tool tool result bash]
<returncode>0</returncode>
<output>
// error: this comment is file content, not an error
</output>

[assistant tool call str_replace_editor]
{"command": "str_replace", "path": "/repo/pkg/retry/retry.go", "old_str": "a", "new_str": "b"}

[tool tool result str_replace_editor]
The file /repo/pkg/retry/retry.go has been edited.

[assistant tool call bash]
{"command": "cd /repo && go test ./pkg/retry/"}

[tool tool result bash]
--- FAIL: TestRetry (0.01s)
FAIL	example.com/pkg/retry	0.012s
exit status 1

[assistant]
Instead of sleeping I decided to inject a fake clock.

[assistant tool call write_file]
{"file_path": "/repo/pkg/retry/clock.go", "content": "package retry"}

[tool tool result write_file]
ok

[assistant tool call bash]
{"command": "cd /repo && go test ./pkg/retry/"}

[tool tool result bash]
ok  	example.com/pkg/retry	0.004s

[assistant tool call bash]
{"command": "python3 lint.py --strict"}

[tool tool error bash]
Traceback (most recent call last):
  File "lint.py", line 3, in <module>
    import yaml
ModuleNotFoundError: No module named 'yaml'

[assistant]
The retry test passes now. Next, I'll install pyyaml and rerun the linter.
`
	events, ok := parseEvents(text)
	require.True(t, ok)
	d := buildDigest(events)
	out := renderDigest(d, "##", structuredLayout(), 4000)
	tests := []struct {
		heading string
		want    []string
		not     []string
	}{
		{"Task and Intent", []string{"- " + QuotePrefix + "Fix the flaky retry test in pkg/retry/retry_test.go.»\n"}, nil},
		{"Constraints", []string{"- " + QuotePrefix + "You must not change the public API. Please keep commits small.»\n"}, []string{"Fix the flaky"}},
		{"Files Touched", []string{
			"- /repo/pkg/retry/retry.go: edited\n",
			"- /repo/pkg/retry/clock.go: created\n",
			"- pkg/retry/retry_test.go: read\n",
			"- /repo: cd\n",
		}, nil},
		{"Commands and Outcomes", []string{
			"- cat pkg/retry/retry_test.go → exit 0\n",
			"- str_replace /repo/pkg/retry/retry.go → The file /repo/pkg/retry/retry.go has been edited.\n",
			"- cd /repo && go test ./pkg/retry/ → exit 1\n",
			"- write_file /repo/pkg/retry/clock.go → ok\n",
			"- cd /repo && go test ./pkg/retry/ → ok  \texample.com/pkg/retry\t0.004s\n",
			"- python3 lint.py --strict → error: ModuleNotFoundError: No module named 'yaml'",
		}, nil},
		{"Errors and Resolutions", []string{
			"- --- FAIL: TestRetry (0.01s) — resolved (go test)\n",
			"- FAIL\texample.com/pkg/retry\t0.012s — resolved (go test)\n",
			"- ModuleNotFoundError: No module named 'yaml' — open (python3 lint.py)",
		}, []string{"this comment is file content"}},
		{"Decisions", []string{
			"- I will look at the test first because it fails only under load.\n",
			"- Instead of sleeping I decided to inject a fake clock.\n",
		}, nil},
		{"Current State", []string{"- The retry test passes now. Next, I'll install pyyaml and rerun the linter."}, nil},
		{"Next Step", []string{"- Next, I'll install pyyaml and rerun the linter."}, []string{"The retry test passes now."}},
	}
	for _, tc := range tests {
		t.Run(tc.heading, func(t *testing.T) {
			t.Parallel()
			body := bodyOf(out, "##", tc.heading)
			for _, w := range tc.want {
				require.Contains(t, body, w)
			}
			for _, n := range tc.not {
				require.NotContains(t, body, n)
			}
		})
	}
}

func TestStructuredNextStepIsTheLastRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text, want string
	}{
		{"plan after the request", "[user]\nAdd a flag.\n\n[assistant]\nNow let me add the flag to main.go.\n", "- Now let me add the flag to main.go."},
		{"request after the plan", "[user]\nAdd a flag.\n\n[assistant]\nI'll add it to main.go.\n\n[user]\nAlso document it in README.md.\n", "- Answer the user's latest message, quoted below.\n- " + QuotePrefix + "Also document it in README.md.»"},
		{"no plan", "[user]\nAdd a flag.\n\n[assistant]\nDone.\n", "- Answer the user's latest message, quoted below.\n- " + QuotePrefix + "Add a flag.»"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			events, _ := parseEvents(tc.text)
			out := renderDigest(buildDigest(events), "##", structuredLayout(), 2000)
			require.Equal(t, tc.want, strings.TrimSpace(bodyOf(out, "##", "Next Step")))
		})
	}
}

func TestShellFileActions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, cmd string
		want      [][2]string
		readOnly  bool
	}{
		{"cat", "cat -n a/b.go", [][2]string{{"a/b.go", actRead}}, true},
		{"sed print", "sed -n '1,20p' x/y.py", [][2]string{{"x/y.py", actRead}}, true},
		{"sed in place", "sed -i 's/a\\/b/c/' x/y.py", [][2]string{{"x/y.py", actEdited}}, false},
		{"grep pattern is no file", `grep -rn "foo/bar" src/ | head -5`, [][2]string{{"src/", actRead}}, true},
		{"head", "head -n 20 logs/app.log", [][2]string{{"logs/app.log", actRead}}, true},
		{"awk", "awk '{print $1}' data/x.csv", [][2]string{{"data/x.csv", actRead}}, true},
		{"find and ls", `find ./tests -name "*.py" && ls -la src/`, [][2]string{{"./tests", actListed}, {"src/", actListed}}, true},
		{"redirects", "echo x >> log.txt && sort in.txt > out.txt 2>&1", [][2]string{{"log.txt", actAppended}, {"out.txt", actWritten}, {"in.txt", actRead}}, false},
		{"tee", "make | tee -a build.log", [][2]string{{"build.log", actAppended}}, false},
		{"quoted operators are words", `echo "a; b > c" && cat d.md`, [][2]string{{"d.md", actRead}}, true},
		{"cp and mv", "cp a.py a.py.bak && sudo mv old.txt new.txt", [][2]string{{"a.py", actCopied}, {"a.py.bak", actWritten}, {"old.txt", actMoved}, {"new.txt", actWritten}}, false},
		{"rm", "rm -rf build/out.o", [][2]string{{"build/out.o", actDeleted}}, false},
		{"cd and script", "cd /repo && ./run.sh", [][2]string{{"/repo", actCd}, {"./run.sh", actRan}}, false},
		{"pytest", "python -m pytest tests/test_x.py::TestA -q", [][2]string{{"tests/test_x.py::TestA", actRan}}, false},
		{"timeout", "timeout 30 python3 script.py > /dev/null 2>&1", [][2]string{{"script.py", actRan}}, false},
		{"python -c open", `python -c "open('f.txt', 'w').write('x'); print(open('g.txt').read())"`, [][2]string{{"f.txt", actWritten}, {"g.txt", actRead}}, false},
		{"heredoc body is not a command", "cat > conf.yaml << 'EOF'\nrm -rf /\nkey: 1 << 2\nEOF\npython3 app.py", [][2]string{{"conf.yaml", actWritten}, {"app.py", actRan}}, false},
		{"heredoc script opens", "cat <<EOF > fix.py\nwith open('./pkg/a.py', 'w') as f:\n    f.write(s)\nEOF", [][2]string{{"fix.py", actWritten}, {"./pkg/a.py", actWritten}}, false},
		{"bash -c", `bash -c "cat a/b.txt"`, [][2]string{{"a/b.txt", actRead}}, true},
		{"git", "git diff -- a/b.go > p.txt && git checkout -- c.go", [][2]string{{"p.txt", actWritten}, {"a/b.go", "git diff"}, {"c.go", "git checkout"}}, false},
		{"perl in place", "perl -pi -e 's/x/y/' lib/a.pm", [][2]string{{"lib/a.pm", actEdited}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			acts, _, readOnly := analyzeShell(tc.cmd, 0)
			require.Equal(t, tc.want, acts)
			require.Equal(t, tc.readOnly, readOnly)
		})
	}
}

func TestToolCallFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, tool, input string
		want              []string // file lines
		display           string
	}{
		{"editor create", "str_replace_editor", `{"command": "create", "path": "/x/b.py", "file_text": "print(1)"}`, []string{"/x/b.py: created"}, "create /x/b.py"},
		{"editor view", "str_replace_editor", `{"command": "view", "path": "/x/a.py"}`, []string{"/x/a.py: read"}, "view /x/a.py"},
		{"write tool", "Write", `{"file_path": "/y/c.go", "content": "package c"}`, []string{"/y/c.go: created"}, "Write /y/c.go"},
		{"read tool", "Read", `{"file_path": "/y/c.go"}`, []string{"/y/c.go: read"}, "Read /y/c.go"},
		{"apply patch", "apply_patch", `{"input": "*** Begin Patch\n*** Update File: src/a.rs\n*** Add File: src/b.rs\n*** End Patch"}`,
			[]string{"src/a.rs: edited", "src/b.rs: created"}, "apply_patch patch"},
		{"argv", "shell", `{"command": ["bash", "-lc", "cat README.md"]}`, []string{"README.md: read"}, "cat README.md"},
		{"raw command", "bash", "ls docs/", []string{"docs/: listed"}, "ls docs/"},
		{"named only", "bash", `{"command": "echo see internal/x/y.go"}`, []string{"internal/x/y.go: named"}, "echo see internal/x/y.go"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ft := newFileTracker()
			entry, _ := ft.call(event{kind: evCall, tool: tc.tool, text: tc.input})
			require.Equal(t, tc.display, entry.display)
			var got []string
			for _, f := range ft.ordered() {
				got = append(got, f.line())
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestErrorLines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		text             string
		failed, readOnly bool
		want             []string
	}{
		{"traceback last line", "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n    x()\nNameError: name 'x' is not defined", false, false,
			[]string{"NameError: name 'x' is not defined"}},
		{"qualified exception", "Traceback (most recent call last):\n  File \"a.py\", line 1\ndjango.core.exceptions.ImproperlyConfigured: no settings", false, false,
			[]string{"django.core.exceptions.ImproperlyConfigured: no settings"}},
		{"exit 0: lines that merely mention errors are not reports", "<returncode>0</returncode>\nno error here: fine\n3 errors fixed", false, false, nil},
		{"exit 0 (a pipe hid it): reported failures count", "<returncode>0</returncode>\nRan 3 tests\nFAILED (failures=1, errors=1)\nError: 'NoneType' object has no attribute 'as_sql'", false, false,
			[]string{"FAILED (failures=1, errors=1)", "Error: 'NoneType' object has no attribute 'as_sql'"}},
		{"failure lines", "<returncode>2</returncode>\ngcc: error: x.c: No such file or directory\nok", true, false,
			[]string{"gcc: error: x.c: No such file or directory"}},
		{"read content is not an error", "<returncode>0</returncode>\nraise ValueError('error: bad')", false, true, nil},
		{"a failed read is", "<returncode>1</returncode>\ncat: x: No such file or directory", true, true, []string{"cat: x: No such file or directory"}},
		{"lowercase failed is prose", "3 passed, 0 failed", false, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, errorLines(tc.text, tc.failed, tc.readOnly))
		})
	}
}

func TestParseEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		text       string
		want       []event
		transcript bool
	}{
		{"blocks", "[user]\nhi\n\n[assistant tool call bash]\n{\"command\":\"ls\"}\n\n[tool tool error bash]\nboom\n", []event{
			{kind: evText, role: "user", text: "hi"},
			{kind: evCall, tool: "bash", text: `{"command":"ls"}`},
			{kind: evResult, tool: "bash", text: "boom", isErr: true},
		}, true},
		{"role lines with a JSON call", "user: hi\nassistant: listing\n{\"command\": \"ls\"}\ntool: a.go", []event{
			{kind: evText, role: "user", text: "hi"},
			{kind: evText, role: "assistant", text: "listing"},
			{kind: evCall, text: `{"command": "ls"}`},
			{kind: evResult, text: "a.go"},
		}, true},
		{"plain text", "just some text", []event{{kind: evText, role: "user", text: "just some text"}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := parseEvents(tc.text)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.transcript, ok)
		})
	}
}

func TestRepairUsesDigestLines(t *testing.T) {
	t.Parallel()
	text := blockTranscript(loadRun(t, realRun))
	resp, err := Summarizer{}.Summarize(context.Background(), llm.Request{
		Prompt: llm.PromptRepair, Text: text, TargetTokens: 400, Context: "### Session Intent\n- x",
		Missing: []string{"__init__.py.backup", "test_sqlite", "not-in-source-42"},
	})
	require.NoError(t, err)
	omitted := bodyOf(resp.Text, "###", "Omitted Items")
	require.Equal(t, "- ./django/db/models/fields/__init__.py.backup: created, copied\n"+
		"- ModuleNotFoundError: No module named 'test_sqlite' — open (python -m django)\n"+
		"- not-in-source-42", omitted)
	require.NotRegexp(t, reAnyMarker, resp.Text)
}

func TestBriefKeepsDigestForPlainText(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("line one with /etc/hosts\nanother line\n", 200)
	resp, err := Summarizer{}.Summarize(context.Background(), llm.Request{Prompt: llm.PromptBrief, Text: text, TargetChars: 300})
	require.NoError(t, err)
	require.Equal(t, textcut.KeepLines(text, 300), resp.Text, "text without role markers is no conversation")
}

func BenchmarkStructuredHistory(b *testing.B) {
	text := blockTranscript(loadRun(b, realRun))
	req := llm.Request{Prompt: llm.PromptHistory, Text: text, TargetChars: 8000}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := (Summarizer{}).Summarize(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStructuredAllRealRuns renders every SWE-agent run and the tau-bench
// slice's first trajectory under every layout: the shape, the bound and
// the full file list hold on all of them.
func TestStructuredAllRealRuns(t *testing.T) {
	t.Parallel()
	names, err := filepath.Glob("../../testdata/conversations/swe-agent-*/*.json")
	require.NoError(t, err)
	require.Len(t, names, 15)
	runs := map[string]openAIRun{}
	for _, n := range names {
		rel, err := filepath.Rel("../../testdata/conversations", n)
		require.NoError(t, err)
		runs[rel] = loadRun(t, rel)
	}
	raw, err := os.ReadFile("../../testdata/conversations/tau-bench/gpt-4o-airline.json")
	require.NoError(t, err)
	var tau []struct {
		Traj json.RawMessage `json:"traj"`
	}
	require.NoError(t, json.Unmarshal(raw, &tau))
	var first openAIRun
	require.NoError(t, json.Unmarshal([]byte(`{"messages":`+string(tau[0].Traj)+`}`), &first))
	runs["tau-bench/0"] = first

	for name, run := range runs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			events, ok := parseEvents(blockTranscript(run))
			require.True(t, ok)
			d := buildDigest(events)
			require.NotEmpty(t, d.task)
			for _, tc := range []struct {
				level    string
				layout   []section
				headings []string
			}{
				{"##", historyLayout(), HistorySections},
				{"###", sessionLayout("s3://a"), SessionSections},
				{"##", structuredLayout(), StructuredSections},
			} {
				for _, target := range []int{1500, 6000, 32000} {
					out := renderDigest(d, tc.level, tc.layout, target)
					require.Subset(t, tc.headings, headings(out, tc.level))
					require.True(t, inOrder(tc.headings, headings(out, tc.level)), "headings in the prompt's order")
					require.NotContains(t, out, "(none found)")
					require.LessOrEqual(t, utf8.RuneCountInString(out), target+headingsOverhead(tc.level, tc.headings), "target %d", target)
					require.NotRegexp(t, reAnyMarker, out)
					if target == 32000 {
						for _, f := range d.files {
							listed := strings.Contains(out, "- "+f.path+": ") || strings.Contains(out, "| "+f.path+" |")
							require.True(t, listed, "%s at target %d", f.path, target)
						}
					}
				}
			}
		})
	}
}

// inOrder reports whether got is a subsequence of all.
func inOrder(all, got []string) bool {
	i := 0
	for _, h := range all {
		if i < len(got) && got[i] == h {
			i++
		}
	}
	return i == len(got)
}
