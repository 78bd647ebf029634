package client

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/contract"
)

// jsonKinds maps the JSON names of t's fields (embedded structs
// flattened) to their kinds.
func jsonKinds(t reflect.Type) map[string]reflect.Kind {
	out := map[string]reflect.Kind{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonKinds(f.Type) {
				out[k] = v
			}
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = f.Type.Kind()
	}
	return out
}

// TestClientTypesMatchTheServers: the client keeps standalone copies of
// the server's answer types (it imports nothing internal), so every field
// the server sends must be in the copy, by name and kind.
func TestClientTypesMatchTheServers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		server, client reflect.Type
	}{
		{"pass figures", reflect.TypeOf(contract.PassStat{}), reflect.TypeOf(PassStat{})},
		{"a finished run's outcome", reflect.TypeOf(contract.Outcome{}), reflect.TypeOf(Result{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := jsonKinds(tc.client)
			for name, kind := range jsonKinds(tc.server) {
				require.Contains(t, got, name, "%s lacks the server's field %q", tc.client, name)
				require.Equal(t, kind, got[name], "field %q", name)
			}
		})
	}
}

// notInClients are the operations under /v1 of api/openapi.yaml that the
// clients leave to plain HTTP, each with why (none today). Keep it short:
// any other operation must be a method of each client.
var notInClients = map[string]string{}

// opMarker is how a client method names its operation: a line "op: METHOD
// /path" in its doc comment.
var opMarker = regexp.MustCompile(`(?m)^op: (GET|PUT|POST|DELETE|PATCH) (/\S+)$`)

// clientOps maps "METHOD /path" to the *Client method whose doc comment
// names it, read from this package's sources.
func clientOps(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	ops := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Doc == nil || !fn.Name.IsExported() {
				continue
			}
			star, ok := fn.Recv.List[0].Type.(*ast.StarExpr)
			if !ok || star.X.(*ast.Ident).Name != "Client" {
				continue
			}
			for _, m := range opMarker.FindAllStringSubmatch(fn.Doc.Text(), -1) {
				op := m[1] + " " + m[2]
				require.NotContains(t, ops, op, "%s and %s both name %s", ops[op], fn.Name.Name, op)
				ops[op] = fn.Name.Name
			}
		}
	}
	return ops
}

// specOps lists the operations under /v1 of api/openapi.yaml as "METHOD
// /path".
func specOps(t *testing.T) []string {
	t.Helper()
	var out []string
	for path, item := range openAPI(t)["paths"].(doc) {
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		for method := range item.(doc) {
			switch method {
			case "get", "put", "post", "delete", "patch":
				out = append(out, strings.ToUpper(method)+" "+path)
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestClientCoversTheAPI: every operation under /v1 of api/openapi.yaml is
// a method of the client (its doc comment says "op: METHOD /path") or is
// on notInClients, and every method's operation is in the document.
func TestClientCoversTheAPI(t *testing.T) {
	t.Parallel()
	ops := clientOps(t)
	spec := specOps(t)
	for _, op := range spec {
		_, excluded := notInClients[op]
		if excluded {
			require.NotContains(t, ops, op, "%s is implemented (by %s): take it off notInClients", op, ops[op])
			continue
		}
		require.Contains(t, ops, op, "the client has no method for %s (mark it \"op: %s\" in its doc comment)", op, op)
	}
	for op, method := range ops {
		require.Contains(t, spec, op, "%s names %s, which api/openapi.yaml does not document", method, op)
	}
	for op := range notInClients {
		require.Contains(t, spec, op, "notInClients lists %s, which api/openapi.yaml does not document", op)
	}
}

// TestClientManagementTypesMatchTheDocument: the management types have
// exactly the properties of their schemas in api/openapi.yaml.
func TestClientManagementTypesMatchTheDocument(t *testing.T) {
	t.Parallel()
	schemas := openAPI(t)["components"].(doc)["schemas"].(doc)
	for _, tc := range []struct {
		schema string
		typ    reflect.Type
	}{
		{"SessionStatus", reflect.TypeOf(SessionStatus{})},
		{"HistoryRow", reflect.TypeOf(HistoryRow{})},
		{"Promotion", reflect.TypeOf(Promotion{})},
		{"PromoteResponse", reflect.TypeOf(PromoteResult{})},
		{"ReplayRequest", reflect.TypeOf(Replay{})},
		{"Submitted", reflect.TypeOf(Submitted{})},
		{"Erasure", reflect.TypeOf(Erasure{})},
		{"Retention", reflect.TypeOf(Retention{})},
		{"WebhookEndpoint", reflect.TypeOf(WebhookEndpoint{})},
		{"Delivery", reflect.TypeOf(Delivery{})},
		{"DeliveryAttempt", reflect.TypeOf(DeliveryAttempt{})},
		{"Redelivered", reflect.TypeOf(Redelivered{})},
		{"Hit", reflect.TypeOf(Hit{})},
		{"PreviousErasure", reflect.TypeOf(PreviousErasure{})},
		{"RunRecord", reflect.TypeOf(Run{})},
		{"RunList", reflect.TypeOf(RunList{})},
		{"Diff", reflect.TypeOf(Diff{})},
		{"Change", reflect.TypeOf(Change{})},
		{"WatermarkList", reflect.TypeOf(WatermarkList{})},
		{"WatermarkList.watermarks.items", reflect.TypeOf(Watermark{})},
		{"InspectRequest", reflect.TypeOf(Inspection{})},
		{"InspectResult", reflect.TypeOf(InspectResult{})},
		{"InspectResult.report", reflect.TypeOf(InspectReport{})},
		{"CompressRequest", reflect.TypeOf(Compression{})},
		{"CompressResult", reflect.TypeOf(Compressed{})},
		{"ReplaysRequest", reflect.TypeOf(Replays{})},
	} {
		t.Run(tc.schema, func(t *testing.T) {
			t.Parallel()
			parts := strings.Split(tc.schema, ".")
			s := schemas[parts[0]].(doc)
			for _, p := range parts[1:] {
				if p == "items" {
					s = s["items"].(doc)
				} else {
					s = s["properties"].(doc)[p].(doc)
				}
			}
			var want, got []string
			for name := range s["properties"].(doc) {
				want = append(want, name)
			}
			for name := range jsonKinds(tc.typ) {
				got = append(got, name)
			}
			sort.Strings(want)
			sort.Strings(got)
			require.Equal(t, want, got, "%s has the properties of schema %s", tc.typ, tc.schema)
		})
	}
}
