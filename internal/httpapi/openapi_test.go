package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// openAPIPath is the document, relative to this package.
const openAPIPath = "../../api/openapi.yaml"

type doc = map[string]any

func loadOpenAPI(t *testing.T) doc {
	t.Helper()
	data, err := os.ReadFile(openAPIPath)
	require.NoError(t, err)
	var d doc
	require.NoError(t, yaml.Unmarshal(data, &d))
	require.Equal(t, "3.0.3", d["openapi"])
	return d
}

// httpMethods are the operation keys of an OpenAPI path item.
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// operations returns the documented operations as "METHOD /path".
func operations(d doc) map[string]doc {
	out := map[string]doc{}
	for path, item := range d["paths"].(doc) {
		for method, op := range item.(doc) {
			if slices.Contains(httpMethods, method) {
				out[strings.ToUpper(method)+" "+path] = op.(doc)
			}
		}
	}
	return out
}

func testAPI() *api {
	return New(Deps{}).(*api)
}

func TestOpenAPIDocumentsEveryRouteAndOnlyThose(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	a := testAPI()
	var registered, documented []string
	for _, rt := range a.routes() {
		registered = append(registered, rt.Method+" "+rt.Path)
	}
	for k := range operations(d) {
		documented = append(documented, k)
	}
	sort.Strings(registered)
	sort.Strings(documented)
	require.Equal(t, registered, documented)
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

func TestOpenAPIPathsReachTheirHandlers(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	a := testAPI()
	for key, op := range operations(d) {
		method, path, _ := strings.Cut(key, " ")
		// Each documented path parameter is declared, and a concrete path
		// routes to the very pattern documented.
		params := map[string]bool{}
		for _, p := range resolveParams(t, d, op) {
			if p["in"] == "path" {
				params[p["name"].(string)] = true
				require.Equal(t, true, p["required"], "%s: path parameter %s must be required", key, p["name"])
			}
		}
		for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
			require.True(t, params[m[1]], "%s: path parameter %s is not declared", key, m[1])
		}
		concrete := pathParam.ReplaceAllString(path, "x-1")
		req := httptest.NewRequest(method, concrete, nil)
		_, pattern := a.mux.Handler(req)
		require.Equal(t, key, pattern, "%s %s", method, concrete)
	}
}

func resolveParams(t *testing.T, d doc, op doc) []doc {
	t.Helper()
	raw, _ := op["parameters"].([]any)
	var out []doc
	for _, p := range raw {
		out = append(out, resolve(t, d, p.(doc)))
	}
	return out
}

// resolve follows a local $ref.
func resolve(t *testing.T, d doc, node doc) doc {
	t.Helper()
	for i := 0; i < 10; i++ {
		ref, ok := node["$ref"].(string)
		if !ok {
			return node
		}
		require.True(t, strings.HasPrefix(ref, "#/"), "only local refs: %s", ref)
		var cur any = d
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			m, ok := cur.(doc)
			require.True(t, ok, "ref %s", ref)
			cur, ok = m[part]
			require.True(t, ok, "ref %s does not resolve", ref)
		}
		node = cur.(doc)
	}
	t.Fatalf("ref chain too long")
	return nil
}

func TestOpenAPIErrorsUseTheCommonErrorSchema(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	a := testAPI()
	byKey := map[string]route{}
	for _, rt := range a.routes() {
		byKey[rt.Method+" "+rt.Path] = rt
	}
	for key, op := range operations(d) {
		responses := op["responses"].(doc)
		for code, resp := range responses {
			n, err := strconv.Atoi(code)
			if err == nil && n < 400 {
				continue
			}
			if key == "GET /readyz" && n == http.StatusServiceUnavailable {
				// The readiness probe's 503 is its report, which says
				// which dependency is down, not an error of the request.
				continue
			}
			r := resolve(t, d, resp.(doc))
			content, ok := r["content"].(doc)
			require.True(t, ok, "%s %s: error response has no content", key, code)
			require.Len(t, content, 1, "%s %s: errors are only JSON", key, code)
			media, ok := content["application/json"].(doc)
			require.True(t, ok, "%s %s: errors are application/json", key, code)
			require.Equal(t, "#/components/schemas/Error", media["schema"].(doc)["$ref"], "%s %s", key, code)
		}
		rt := byKey[key]
		if rt.Auth {
			require.Contains(t, responses, "401", "%s: authenticated routes document 401", key)
			require.Contains(t, responses, "500", "%s: authenticated routes document 500", key)
		} else {
			require.Equal(t, []any{}, op["security"], "%s: a route without auth says so", key)
		}
		if rt.Request != nil {
			require.Contains(t, responses, "400", "%s: routes with a body document 400", key)
			require.Contains(t, responses, "413", "%s: routes with a body document 413", key)
		}
		// Runs and (for reads) sessions are resources the caller names;
		// posting an event creates its session instead.
		if strings.Contains(key, "{run}") || (rt.Method == http.MethodGet && strings.Contains(key, "{session}")) {
			require.Contains(t, responses, "404", "%s: routes naming a resource document 404", key)
		}
	}
	// The Error schema is what writeError writes.
	checkSchema(t, d, d["components"].(doc)["schemas"].(doc)["Error"].(doc), marshalFilled(t, errorBody{}), "Error")
}

func TestOpenAPIBodiesMatchTheHandlersTypes(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	ops := operations(d)
	for _, rt := range testAPI().routes() {
		key := rt.Method + " " + rt.Path
		op := ops[key]
		require.NotNil(t, op, key)
		if rt.Request != nil {
			body, ok := op["requestBody"].(doc)
			require.True(t, ok, "%s: request body not documented", key)
			schema := body["content"].(doc)["application/json"].(doc)["schema"].(doc)
			checkSchema(t, d, schema, marshalFilled(t, rt.Request), key+" request")
		} else {
			require.NotContains(t, op, "requestBody", "%s: documents a body the handler does not read", key)
		}
		responses := op["responses"].(doc)
		for status, v := range rt.Responses {
			resp, ok := responses[strconv.Itoa(status)].(doc)
			require.True(t, ok, "%s: response %d not documented", key, status)
			schema := resolve(t, d, resp)["content"].(doc)["application/json"].(doc)["schema"].(doc)
			checkSchema(t, d, schema, marshalFilled(t, v), fmt.Sprintf("%s %d", key, status))
		}
		for code := range responses {
			n, _ := strconv.Atoi(code)
			if n >= 200 && n < 300 && rt.Responses != nil {
				_, ok := rt.Responses[n]
				require.True(t, ok, "%s: documents %d, which the handler never answers", key, n)
			}
		}
	}
}

// checkSchema compares a JSON value the handler writes (or reads) with a
// schema: every object property emitted is documented and every
// documented property is emitted (the value is filled, so nothing is left
// out by omitempty); arrays and scalars have the documented type.
func checkSchema(t *testing.T, d doc, schema doc, value any, at string) {
	t.Helper()
	schema = resolve(t, d, schema)
	typ, _ := schema["type"].(string)
	switch v := value.(type) {
	case map[string]any:
		if typ == "" {
			return // a free-form value (conversation)
		}
		require.Equal(t, "object", typ, at)
		props, _ := schema["properties"].(doc)
		if props == nil {
			if ap, ok := schema["additionalProperties"].(doc); ok {
				for k, item := range v {
					checkSchema(t, d, ap, item, at+"."+k)
				}
			}
			return
		}
		var got, want []string
		for k := range v {
			got = append(got, k)
		}
		for k := range props {
			want = append(want, k)
		}
		sort.Strings(got)
		sort.Strings(want)
		require.Equal(t, want, got, "%s: documented properties vs the Go type's JSON fields", at)
		for k, item := range v {
			checkSchema(t, d, props[k].(doc), item, at+"."+k)
		}
	case []any:
		require.Equal(t, "array", typ, at)
		require.NotEmpty(t, v, at)
		checkSchema(t, d, schema["items"].(doc), v[0], at+"[]")
	case string:
		if typ != "" {
			require.Equal(t, "string", typ, at)
		}
	case float64:
		if typ != "" {
			require.Contains(t, []string{"integer", "number"}, typ, at)
			if typ == "integer" {
				require.Equal(t, float64(int64(v)), v, "%s: documented as integer", at)
			}
		}
	case bool:
		if typ != "" {
			require.Equal(t, "boolean", typ, at)
		}
	case nil:
		t.Fatalf("%s: filled value is null", at)
	}
}

// marshalFilled sets every field of a zero value (recursively) and returns
// its JSON decoded as generic values.
func marshalFilled(t *testing.T, v any) any {
	t.Helper()
	p := reflect.New(reflect.TypeOf(v))
	fill(p.Elem(), 0)
	data, err := json.Marshal(p.Interface())
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(data, &out))
	return out
}

var (
	timeType = reflect.TypeOf(time.Time{})
	rawType  = reflect.TypeOf(json.RawMessage(nil))
)

func fill(v reflect.Value, depth int) {
	if depth > 8 {
		return
	}
	if v.Kind() == reflect.Struct && v.Type() != timeType {
		// An unexported embedded struct is not settable itself, but its
		// exported fields are, and JSON promotes them.
		for i := 0; i < v.NumField(); i++ {
			fill(v.Field(i), depth+1)
		}
		return
	}
	if !v.CanSet() {
		return
	}
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)))
		return
	case v.Type() == rawType:
		v.SetBytes([]byte(`{"k":1}`))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth+1)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(k, depth+1)
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	}
}

func TestUnknownRoutesAnswerTheCommonError(t *testing.T) {
	t.Parallel()
	h := New(Deps{})
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, "/v1/nothing", http.StatusNotFound, CodeNotFound},
		{http.MethodDelete, "/v1/runs/r1", http.StatusMethodNotAllowed, CodeMethodNotAllowed},
		{http.MethodGet, "/v1/sessions/s/events", http.StatusMethodNotAllowed, CodeMethodNotAllowed},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		require.Equal(t, tc.status, rec.Code, "%s %s", tc.method, tc.path)
		var body struct {
			Error apiError `json:"error"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		require.Equal(t, tc.code, body.Error.Code)
		require.NotEmpty(t, body.Error.Message)
	}
}
