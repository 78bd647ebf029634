package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The first table opens the section; a second one goes under it.
func TestAppendTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := os.WriteFile(path, []byte("# Benchmarks\n\nbench tables\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"### Chaos soak, one\n", "### Chaos soak, two\n"} {
		if err := appendTable(path, table); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if strings.Count(text, "\n"+sectionHeading+"\n") != 1 || !strings.HasPrefix(text, "# Benchmarks\n\nbench tables\n\n## Chaos soak") ||
		strings.Index(text, "one") > strings.Index(text, "two") {
		t.Fatalf("file:\n%s", text)
	}
}
