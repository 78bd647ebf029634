package policy

import (
	"encoding/json"
	"fmt"
	"os"
)

// Overrides maps a preset name to a JSON object of field overrides, as read
// from the preset file (COMPACTOR_PRESET_FILE).
type Overrides map[string]json.RawMessage

// LoadFile reads a preset file: {"presets": {"three-tier": {...}, ...}}.
// Every key must name a built-in preset, and every override must apply, so
// that a bad file fails at start rather than at the first run.
func LoadFile(path string) (Overrides, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read preset file: %w", err)
	}
	var doc struct {
		Presets Overrides `json:"presets"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("preset file %s: %w", path, err)
	}
	for name, raw := range doc.Presets {
		if _, err := Resolve(name, raw); err != nil {
			return nil, fmt.Errorf("preset file %s: %w", path, err)
		}
	}
	return doc.Presets, nil
}

// Merge returns base with the fields of top applied on it (both JSON
// objects). A request's overrides are merged over the file's ones.
func Merge(base, top json.RawMessage) (json.RawMessage, error) {
	if len(base) == 0 {
		return top, nil
	}
	if len(top) == 0 {
		return base, nil
	}
	var a, b map[string]any
	if err := json.Unmarshal(base, &a); err != nil {
		return nil, fmt.Errorf("merge overrides: %w", err)
	}
	if err := json.Unmarshal(top, &b); err != nil {
		return nil, fmt.Errorf("merge overrides: %w", err)
	}
	mergeMaps(a, b)
	return json.Marshal(a)
}

func mergeMaps(dst, src map[string]any) {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				mergeMaps(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
}
