package httpapi

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// mcpToolNames are names docs/api.md mentions that are the MCP server's
// tools (docs/mcp.md), not fields of the HTTP API.
var mcpToolNames = map[string]bool{"compress_to_checkpoint": true, "recover_context": true, "search_context": true, "context_status": true}

// fieldLike is a backticked name in docs/api.md that reads as a field, a
// parameter or a value: snake_case, or dotted (base.sha256).
var fieldLike = regexp.MustCompile("`([a-z][a-z0-9_]*(?:\\.[a-z0-9_]+)*)`")

// TestAPIDocNamesOnlyDocumentedFields: every field, parameter or value
// that docs/api.md names (each part of a dotted name) is one that
// api/openapi.yaml documents, so that the guide cannot drift from the
// reference by a name.
func TestAPIDocNamesOnlyDocumentedFields(t *testing.T) {
	t.Parallel()
	known := map[string]bool{}
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch x := v.(type) {
		case doc:
			for k, child := range x {
				if key == "properties" {
					known[k] = true
				}
				if k == "name" {
					if s, ok := child.(string); ok {
						known[s] = true
					}
				}
				walk(child, k)
			}
		case []any:
			for _, child := range x {
				if s, ok := child.(string); ok && key == "enum" {
					known[s] = true
				}
				walk(child, key)
			}
		}
	}
	walk(loadOpenAPI(t), "")
	require.True(t, known["context_limit"], "the walk found the document's properties")

	guide, err := os.ReadFile("../../docs/api.md")
	require.NoError(t, err)
	var unknown []string
	for _, m := range fieldLike.FindAllStringSubmatch(string(guide), -1) {
		name := m[1]
		if !strings.ContainsAny(name, "_.") || mcpToolNames[name] {
			continue
		}
		if known[name] {
			continue
		}
		for _, part := range strings.Split(name, ".") {
			if !known[part] {
				unknown = append(unknown, name)
				break
			}
		}
	}
	require.Empty(t, unknown, "docs/api.md names fields api/openapi.yaml does not document")
}
