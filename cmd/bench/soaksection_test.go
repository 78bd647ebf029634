package main

import (
	"os"
	"path/filepath"
	"testing"
)

// make bench rewrites BENCHMARKS.md but keeps the chaos soak's section.
func TestSoakSectionIsKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if got := soakSection(path); got != "" {
		t.Fatalf("no file: %q", got)
	}
	if err := os.WriteFile(path, []byte("# Benchmarks\n\nold\n\n## Chaos soak\n\ntable\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := soakSection(path); got != "\n## Chaos soak\n\ntable\n" {
		t.Fatalf("section %q", got)
	}
}
