package textcut

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// PostProcess on search results: JSON hits and text listings reduced to
// title, URL and snippet.

type searchHit struct{ title, url, snippet string }

var searchContainers = []string{"results", "items", "organic_results", "organic", "search_results", "hits", "data", "web", "news"}

// jsonSearch recognizes a list of hits that each have a URL and a title,
// at the top level or in a results-like field (one nesting allowed, as in
// Brave's {"web": {"results": […]}}).
func jsonSearch(s string) (string, bool) {
	hits, ok := searchHits([]byte(s), 0)
	if !ok {
		return "", false
	}
	return renderHits(hits), true
}

func searchHits(raw []byte, depth int) ([]searchHit, bool) {
	switch firstByte(raw) {
	case '[':
		elems, err := arrayElems(raw)
		if err != nil || len(elems) == 0 {
			return nil, false
		}
		var hits []searchHit
		for _, e := range elems {
			var m map[string]any
			if json.Unmarshal(e, &m) != nil {
				return nil, false
			}
			h := searchHit{
				title:   stringField(m, "title", "name", "headline"),
				url:     stringField(m, "url", "link", "href", "uri"),
				snippet: stringField(m, "snippet", "description", "summary", "content", "text", "body"),
			}
			if h.url != "" && h.title != "" {
				hits = append(hits, h)
			}
		}
		// Most elements must look like hits, or this is some other list.
		return hits, len(hits) > 0 && len(hits)*2 >= len(elems)
	case '{':
		if depth > 1 {
			return nil, false
		}
		fields, err := objectFields(raw)
		if err != nil {
			return nil, false
		}
		for _, want := range searchContainers {
			for _, f := range fields {
				if f.Key == want {
					if hits, ok := searchHits(f.Raw, depth+1); ok {
						return hits, true
					}
				}
			}
		}
	}
	return nil, false
}

func renderHits(hits []searchHit) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[search results: %d; kept title, URL and snippet]\n", len(hits))
	for i, h := range hits {
		fmt.Fprintf(&b, "%d. %s\n   %s\n", i+1, oneLine(h.title), h.url)
		if h.snippet != "" {
			fmt.Fprintf(&b, "   %s\n", clip(oneLine(h.snippet), snippetMaxRunes))
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

var (
	reMDLink   = regexp.MustCompile(`^\s*(?:[-*+]|\d+[.)])?\s*(?:\*\*)?\[([^\]]+)\]\((https?://[^)\s]+)\)(?:\*\*)?\s*(?:[-–—:|]\s*)?(.*)$`)
	reKeyTitle = regexp.MustCompile(`(?i)^\s*(?:\d+[.)]\s*)?(?:title|name)\s*:\s*(.+)$`)
	reKeyURL   = regexp.MustCompile(`(?i)^\s*(?:url|link|source|href)\s*:\s*(https?://\S+)\s*$`)
	reKeySnip  = regexp.MustCompile(`(?i)^\s*(?:snippet|description|summary|content|text)\s*:\s*(.*)$`)
)

// textSearch parses markdown link lists ("- [Title](url) - snippet") and
// "Title:/URL:/Snippet:" blocks. Without a search-like tool name it wants
// at least three hits.
func textSearch(text string, searchTool bool) (string, bool) {
	lines := strings.Split(text, "\n")
	var linkHits, keyHits []searchHit
	for i := 0; i < len(lines); i++ {
		if m := reMDLink.FindStringSubmatch(lines[i]); m != nil {
			h := searchHit{title: m[1], url: m[2], snippet: strings.TrimSpace(m[3])}
			// Up to two following non-blank lines continue the snippet.
			for k := 0; k < 2 && i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" && !reMDLink.MatchString(lines[i+1]); k++ {
				i++
				h.snippet = strings.TrimSpace(h.snippet + " " + strings.TrimSpace(lines[i]))
			}
			linkHits = append(linkHits, h)
			continue
		}
		if m := reKeyTitle.FindStringSubmatch(lines[i]); m != nil {
			keyHits = append(keyHits, searchHit{title: strings.TrimSpace(m[1])})
			continue
		}
		if len(keyHits) == 0 {
			continue
		}
		last := &keyHits[len(keyHits)-1]
		if m := reKeyURL.FindStringSubmatch(lines[i]); m != nil && last.url == "" {
			last.url = m[1]
		} else if m := reKeySnip.FindStringSubmatch(lines[i]); m != nil && last.snippet == "" {
			last.snippet = strings.TrimSpace(m[1])
		}
	}
	hits := linkHits
	var complete []searchHit
	for _, h := range keyHits {
		if h.url != "" {
			complete = append(complete, h)
		}
	}
	if len(complete) > len(hits) {
		hits = complete
	}
	if len(hits) == 0 || (!searchTool && len(hits) < 3) {
		return "", false
	}
	return renderHits(hits), true
}
