package drift

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIdentifiersKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		want []Identifier
	}{
		{"URL inside parentheses", "see (https://example.com/docs).", []Identifier{{KindURL, "https://example.com/docs"}}},
		{"URL with balanced parentheses", "https://en.wikipedia.org/wiki/Go_(language), ok", []Identifier{{KindURL, "https://en.wikipedia.org/wiki/Go_(language)"}}},
		{"markdown link", "[docs](https://go.dev/doc) here", []Identifier{{KindURL, "https://go.dev/doc"}}},
		{"www address", "visit www.example.org/a.", []Identifier{{KindURL, "www.example.org/a"}}},
		{"path inside URL is not a path", "https://x.org/a/b/c.py", []Identifier{{KindURL, "https://x.org/a/b/c.py"}}},
		{"Windows path", `open C:\Users\me\report.txt now`, []Identifier{{KindPath, `C:\Users\me\report.txt`}}},
		{"Windows path, JSON-escaped", `"C:\\Temp\\x.log"`, []Identifier{{KindPath, `C:\\Temp\\x.log`}}},
		{"UNC path", `\\server\share\file.txt`, []Identifier{{KindPath, `\\server\share\file.txt`}}},
		{"path with line number", "at foo.py:123: in test", []Identifier{{KindPath, "foo.py:123"}}},
		{"path with line and column", "src/main.go:10:5: undefined", []Identifier{{KindPath, "src/main.go:10:5"}}},
		{"absolute path, trailing dot", "written to /tmp/out.json.", []Identifier{{KindPath, "/tmp/out.json"}}},
		{"relative and home paths", "./run.sh and ~/notes/a", []Identifier{{KindPath, "./run.sh"}, {KindPath, "~/notes/a"}}},
		{"bare file name", "edit README.md and go.mod", []Identifier{{KindPath, "README.md"}, {KindPath, "go.mod"}}},
		{"prose slashes are not paths", "and/or TCP/IP km/h 50/50", nil},
		{"closing tags are not paths", "<returncode>1</returncode> <output>x</output> but </tmp/a.py> is", []Identifier{{KindPath, "/tmp/a.py"}}},
		{"member access is not a file", "console.log(x); self.lock = 1; from django.conf import settings", nil},
		{"version", "go 1.26.8 and v2.0.1-rc.1", []Identifier{{KindNumber, "1.26.8"}, {KindNumber, "v2.0.1-rc.1"}}},
		{"IP address, not a version", "host 10.0.0.1:8080 and 192.168.1.20.", []Identifier{{KindID, "10.0.0.1:8080"}, {KindID, "192.168.1.20"}}},
		{"too many dots for either", "oid 1.3.6.1.4.1", nil},
		{"date and timestamp", "on 2024-05-15 and at 2024-05-15T15:00:00Z", []Identifier{{KindNumber, "2024-05-15"}, {KindNumber, "2024-05-15T15:00:00Z"}}},
		{"quantities", "15,000 tokens, 50%, 3.5 GB, 200ms, $120.50 and 200K", []Identifier{
			{KindNumber, "15,000 tokens"}, {KindNumber, "50%"}, {KindNumber, "3.5 GB"}, {KindNumber, "200ms"}, {KindNumber, "$120.50"}, {KindNumber, "200K"},
		}},
		{"bare numbers are not quantities", "line 42 of 1000, x86 and 0x1F", nil},
		{"UUID", "run 550e8400-e29b-41d4-a716-446655440000 done", []Identifier{{KindID, "550e8400-e29b-41d4-a716-446655440000"}}},
		{"hex hashes need a digit", "commit 696bfd7742 defaced", []Identifier{{KindID, "696bfd7742"}}},
		{"tool call ids", "call_abc123 toolu_01ABCdef call_count", []Identifier{{KindID, "call_abc123"}, {KindID, "toolu_01ABCdef"}}},
		{"snake ids", "user mia_li_3668 card credit_card_4421486 utf_8", []Identifier{{KindID, "mia_li_3668"}, {KindID, "credit_card_4421486"}}},
		{"tickets", "fixes #1234 and ABC-123, not UTF-8; CVE-2021-44228", []Identifier{{KindID, "#1234"}, {KindID, "ABC-123"}, {KindID, "CVE-2021-44228"}}},
		{"reservation codes", "reservation ZFA04Y on HAT069, not SHA256", []Identifier{{KindID, "ZFA04Y"}, {KindID, "HAT069"}}},
		{"e-mail", "mail mia.li3818@example.com.", []Identifier{{KindID, "mia.li3818@example.com"}}},
		{"exceptions", "raised ValueError, then requests.exceptions.HTTPError and ErrNotFound; Error alone", []Identifier{
			{KindError, "ValueError"}, {KindError, "HTTPError"}, {KindError, "ErrNotFound"},
		}},
		{"HTTP statuses", "HTTP 404 then 503 Service Unavailable; status: 500; HTTP 200", []Identifier{
			{KindError, "HTTP 404"}, {KindError, "503 Service Unavailable"}, {KindError, "status: 500"},
		}},
		{"codes, errno, exit", "E1234 F401 ENOENT exit status 2", []Identifier{
			{KindError, "E1234"}, {KindError, "F401"}, {KindError, "ENOENT"}, {KindError, "exit status 2"},
		}},
		{"prompt command", "$ go test ./...\n", []Identifier{{KindCommand, "go test ./..."}}},
		{"backticked command", "run `pip install requests` not `foo()`", []Identifier{{KindCommand, "pip install requests"}}},
		{"CLI at line start", "git checkout -b fix\nmake sure it works\n", []Identifier{{KindCommand, "git checkout -b fix"}}},
		{"shell fence", "```bash\necho hi\n# comment\n```\n", []Identifier{{KindCommand, "echo hi"}}},
		{"JSON command field", `{"command": "cd /testbed && ls"}`, []Identifier{{KindCommand, "cd /testbed && ls"}, {KindPath, "/testbed"}}},
		{"diff header is not a command", "diff --git a/x/y.py b/x/y.py", []Identifier{{KindPath, "a/x/y.py"}, {KindPath, "b/x/y.py"}}},
		{"dedup keeps first appearance", "/a/b /c/d /a/b", []Identifier{{KindPath, "/a/b"}, {KindPath, "/c/d"}}},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Identifiers(tt.text)
			if len(tt.want) == 0 {
				require.Empty(t, got)
				return
			}
			require.Equal(t, tt.want, got)
		})
	}
}

// requireSubstrings checks that every identifier's value occurs in text.
func requireSubstrings(t testing.TB, text string, ids []Identifier) {
	t.Helper()
	seen := map[Identifier]bool{}
	for _, id := range ids {
		require.NotEmpty(t, id.Value)
		require.Contains(t, text, id.Value, "identifier %v is not a substring", id)
		require.False(t, seen[id], "duplicate %v", id)
		seen[id] = true
	}
}

func TestIdentifiersAreSubstrings(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(2))
	pieces := []string{
		" ", "\n", "/", ".", ":", "(", ")", "https://", "x.org", "a", "Z9", "123", ",000", " tokens", "%", "$", "_", "-",
		"Error", "#", "C:\\", "\\", "`", "$ ", "git ", "1.2.3", "é", "\xff", "@", "toolu_", "E404",
	}
	for i := 0; i < 300; i++ {
		var b strings.Builder
		for n := r.Intn(200); n > 0; n-- {
			b.WriteString(pieces[r.Intn(len(pieces))])
		}
		text := b.String()
		requireSubstrings(t, text, Identifiers(text))
	}
}

func TestIdentifiersOrder(t *testing.T) {
	t.Parallel()
	text := "first ValueError, then /etc/hosts, then https://a.example/x and 5 GB"
	got := Identifiers(text)
	require.Len(t, got, 4)
	last := -1
	for _, id := range got {
		i := strings.Index(text, id.Value)
		require.Greater(t, i, last, "identifiers must be in order of appearance")
		last = i
	}
}

func TestRetain(t *testing.T) {
	t.Parallel()
	source := "Fixed django/db/backends/base/schema.py:1038 after HTTP 404 from https://api.example.com/v1; see #1234."
	tests := []struct {
		name    string
		summary string
		kept    int
		missing []Identifier
	}{
		{"everything verbatim", source, 4, nil},
		{"basename and bare status code count", "schema.py changed; the API returned 404. Ticket #1234, https://api.example.com/v1", 4, nil},
		{"path without its line number counts", "django/db/backends/base/schema.py was fixed", 1, []Identifier{
			{KindError, "HTTP 404"}, {KindURL, "https://api.example.com/v1"}, {KindID, "#1234"},
		}},
		{"glued code does not count", "error 4040 in myschema.pyc", 0, []Identifier{
			{KindPath, "django/db/backends/base/schema.py:1038"}, {KindError, "HTTP 404"}, {KindURL, "https://api.example.com/v1"}, {KindID, "#1234"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Retain(source, tt.summary)
			require.Equal(t, 4, got.Total)
			require.Equal(t, tt.kept, got.Kept)
			require.Equal(t, tt.missing, got.Missing)
			require.InDelta(t, float64(tt.kept)/4, got.Ratio, 1e-9)
		})
	}
}

func TestRetainWithoutIdentifiers(t *testing.T) {
	t.Parallel()
	got := Retain("just some words here", "")
	require.Equal(t, Retention{Total: 0, Kept: 0, Ratio: 1}, got)
}

func TestIdentifiersTrailingClosersLinear(t *testing.T) {
	t.Parallel()
	// A URL followed by many unbalanced closers must be trimmed without
	// recounting the span for each closer, which would be quadratic.
	text := "https://example.com/a" + strings.Repeat(")", 200_000)
	require.Equal(t, []Identifier{{KindURL, "https://example.com/a"}}, Identifiers(text))
}

func FuzzIdentifiers(f *testing.F) {
	f.Add("see (https://x.org/a_(b)). C:\\x\\y.txt foo.py:12 10.0.0.1:80 v1.2.3 $ git status")
	f.Add("`pip install x` {\"command\": \"ls \\\"a\\\"\"} HTTP 404 ENOENT 15,000 tokens")
	f.Fuzz(func(t *testing.T, text string) {
		requireSubstrings(t, text, Identifiers(text))
		r := Retain(text, text)
		require.Equal(t, r.Total, r.Kept, "a text retains all of its own identifiers")
	})
}
