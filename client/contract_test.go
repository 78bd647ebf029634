package client

import (
	"reflect"
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
