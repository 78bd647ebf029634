package textcut

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// PostProcess on JSON: reading objects and arrays in document order, and
// the reduced form of an API response.

// jsonField is one member of a JSON object, in document order.
type jsonField struct {
	Key string
	Raw json.RawMessage
}

var errNotObject = errors.New("not a JSON object")

// objectFields decodes the members of a JSON object, keeping their order
// (encoding/json maps would lose it).
func objectFields(raw []byte) ([]jsonField, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("read object start: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errNotObject
	}
	var fields []jsonField
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("read key %d: %w", len(fields), err)
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("read value of %q: %w", key, err)
		}
		fields = append(fields, jsonField{Key: key, Raw: v})
	}
	return fields, nil
}

// arrayElems decodes the elements of a JSON array, or fails.
func arrayElems(raw []byte) ([]json.RawMessage, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, fmt.Errorf("decode array: %w", err)
	}
	return elems, nil
}

func firstByte(raw []byte) byte {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

// stringField returns the string value of the first of keys present in m.
func stringField(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := m[k].(string); ok && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

var apiKeys = map[string]bool{"status": true, "statusCode": true, "status_code": true, "code": true, "data": true, "result": true}

// jsonAPI reduces a JSON object that looks like an API response, or any
// JSON object when the tool name says api/http/fetch/request.
func jsonAPI(s, name string) (string, bool) {
	fields, err := objectFields([]byte(s))
	if err != nil {
		return "", false
	}
	apiShaped := nameHas(name, "api", "http", "fetch", "request", "get", "post", "curl", "rest", "graphql")
	status := ""
	for _, f := range fields {
		if apiKeys[f.Key] {
			apiShaped = true
		}
		if (f.Key == "status" || f.Key == "statusCode" || f.Key == "status_code") && firstByte(f.Raw) != '{' && firstByte(f.Raw) != '[' {
			status = strings.Trim(string(bytes.TrimSpace(f.Raw)), `"`)
		}
	}
	if !apiShaped {
		return "", false
	}
	var body bytes.Buffer
	writeReducedObject(&body, fields, 1)
	var b strings.Builder
	b.WriteString("[api response")
	if status != "" {
		b.WriteString(": status " + status)
	}
	b.WriteString("; kept top-level fields and ids, nested values summarized]\n")
	b.Write(body.Bytes())
	return b.String(), true
}

// writeReducedObject writes the kept members of an object whose members are
// at depth (1 for the top level).
func writeReducedObject(b *bytes.Buffer, fields []jsonField, depth int) {
	b.WriteByte('{')
	n := 0
	omitted := 0
	for _, f := range fields {
		v, ok := reducedValue(f.Key, f.Raw, depth)
		if !ok {
			omitted++
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		writeJSONString(b, f.Key)
		b.WriteByte(':')
		b.WriteString(v)
		n++
	}
	if omitted > 0 {
		if n > 0 {
			b.WriteByte(',')
		}
		writeJSONString(b, "…")
		b.WriteByte(':')
		writeJSONString(b, fmt.Sprintf("%d more keys omitted", omitted))
	}
	b.WriteByte('}')
}

// reducedValue returns the JSON to keep for a member at depth, or false to
// drop it. Scalars are kept at depths 1–2 and for key fields deeper;
// objects are opened at depth 1 and reduced to their key fields below;
// arrays become a description unless short and scalar.
func reducedValue(key string, raw json.RawMessage, depth int) (string, bool) {
	switch firstByte(raw) {
	case '{':
		if depth > maxReduceDepth {
			// Each level re-reads its subtree: a depth cap keeps
			// pathological nesting from costing O(size × depth).
			return "", false
		}
		fields, err := objectFields(raw)
		if err != nil {
			return "", false
		}
		if depth >= 2 && !hasKeyField(fields) {
			if depth > 2 {
				return "", false
			}
			return jsonString(fmt.Sprintf("{object: %d keys}", len(fields))), true
		}
		var b bytes.Buffer
		writeReducedObject(&b, fields, depth+1)
		return b.String(), true
	case '[':
		if depth > 2 {
			return "", false
		}
		return reducedArray(raw), true
	default:
		if depth > 2 && !isKeyField(key) {
			return "", false
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return jsonString(clip(s, scalarMaxRunes)), true
		}
		var c bytes.Buffer
		if json.Compact(&c, raw) != nil {
			return "", false
		}
		return c.String(), true
	}
}

// reducedArray keeps a short array of scalars, and otherwise describes the
// array with its length and the ids of its first elements.
func reducedArray(raw json.RawMessage) string {
	elems, err := arrayElems(raw)
	if err != nil {
		return jsonString("[array]")
	}
	scalars := true
	for _, e := range elems {
		if c := firstByte(e); c == '{' || c == '[' {
			scalars = false
			break
		}
	}
	if scalars && len(elems) <= arrayKeepItems {
		var c bytes.Buffer
		if json.Compact(&c, raw) == nil && c.Len() <= arrayKeepBytes {
			return c.String()
		}
	}
	var ids []string
	for _, e := range elems {
		if len(ids) == arrayListIDs {
			break
		}
		fields, err := objectFields(e)
		if err != nil {
			continue
		}
		for _, f := range fields {
			if isIDKey(f.Key) && firstByte(f.Raw) != '{' && firstByte(f.Raw) != '[' {
				ids = append(ids, strings.Trim(string(bytes.TrimSpace(f.Raw)), `"`))
				break
			}
		}
	}
	desc := fmt.Sprintf("[array: %d items", len(elems))
	if len(ids) > 0 {
		desc += "; ids: " + strings.Join(ids, ", ")
		if len(elems) > len(ids) {
			desc += ", …"
		}
	}
	return jsonString(desc + "]")
}

func isIDKey(k string) bool {
	l := strings.ToLower(k)
	return l == "id" || l == "uuid" || l == "key" || strings.HasSuffix(l, "_id") || strings.HasSuffix(k, "Id") || strings.HasSuffix(k, "ID")
}

// isKeyField: ids plus the fields that say what a record is and how it went.
func isKeyField(k string) bool {
	if isIDKey(k) {
		return true
	}
	switch strings.ToLower(k) {
	case "name", "title", "type", "status", "state", "code", "message", "error", "url":
		return true
	}
	return false
}

func hasKeyField(fields []jsonField) bool {
	for _, f := range fields {
		if isKeyField(f.Key) && firstByte(f.Raw) != '{' && firstByte(f.Raw) != '[' {
			return true
		}
	}
	return false
}

func jsonString(s string) string {
	var b bytes.Buffer
	writeJSONString(&b, s)
	return b.String()
}

// writeJSONString quotes s without escaping <, > and &, which would only
// make the reduced text longer.
func writeJSONString(b *bytes.Buffer, s string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	b.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}
