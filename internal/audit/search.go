package audit

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/recoverid"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// Kinds of a Hit.
const (
	HitArchive = "archive"
	HitOffload = "offload"
)

// Search limits.
const (
	DefaultSearchLimit = 50
	MaxSearchLimit     = 1000
	// MaxCountedMatches bounds the matches counted in one offload or
	// message: beyond it a hit says MatchesCapped, and no more are looked
	// for (a one-letter query over 30 MB found millions).
	MaxCountedMatches = 10_000
	// MaxSearchBytes bounds what one search reads (Service.SearchBytes
	// overrides it): a search that reaches it stops and says Truncated.
	MaxSearchBytes = 64 << 20
	// excerptRadius is how many characters an excerpt shows on each side
	// of the match.
	excerptRadius = 120
)

// Hit is one place the query occurs: an offloaded result, or one message
// of an archived original.
type Hit struct {
	// Key is where the hit was found, for the service's own use: callers
	// (and the agent) get the ID and positions, not the store's layout.
	Key   string `json:"-"`
	Kind  string `json:"kind"`
	RunID string `json:"run_id"`
	// Message is the message's position in the archived original's
	// messages[] as the caller sent it (a turn of a ReAct trajectory), -1
	// for an offload or for Anthropic's top-level system prompt.
	Message int `json:"message"`
	// canon is the message's index in the parsed original, which the
	// recovery id names (-1 when there is none).
	canon int
	// Matches counts the occurrences in this message or offload; Excerpt
	// shows the first.
	Matches int    `json:"matches"`
	Excerpt string `json:"excerpt"`
	// MatchesCapped: counting stopped at MaxCountedMatches.
	MatchesCapped bool `json:"matches_capped,omitempty"`
	// ID is what the recover_context tool reads the hit back with: a live
	// offload's id, the archive id of the message ("<sha>.m<i>-<i>", see
	// package recoverid), or for a released offload the archive id of the
	// tool result it was when its run's original holds it; "" when none
	// does (an archive that no longer parses).
	ID string `json:"id,omitempty"`
}

// Search finds query, case-insensitively, in a session's offloaded results
// (the three-tier design's recover_offloaded) and in the archived originals of its runs
// (recover_from_archive), offloads first, then archives newest run first.
// Offloads marked deleted are searched while their object still exists.
// At most limit hits are returned (DefaultSearchLimit when limit <= 0).
func (s *Service) Search(ctx context.Context, tenant, session, query string, limit int) ([]Hit, error) {
	res, err := s.SearchScan(ctx, tenant, session, query, limit)
	return res.Hits, err
}

// SearchResult is what a search found, and whether it stopped at its
// scan budget before reading every offload and archive.
type SearchResult struct {
	Hits      []Hit
	Truncated bool
}

// SearchScan is Search with its scan budget reported: it reads at most
// Service.SearchBytes (MaxSearchBytes when 0) of offloads and archives,
// and counts at most MaxCountedMatches matches in each, so that a request
// costs tens of megabytes whatever the session holds.
func (s *Service) SearchScan(ctx context.Context, tenant, session, query string, limit int) (SearchResult, error) {
	var res SearchResult
	budget := s.SearchBytes
	if budget <= 0 {
		budget = MaxSearchBytes
	}
	var scanned int64
	// spend counts n more bytes read; false once the budget is spent.
	spend := func(n int) bool {
		scanned += int64(n)
		if scanned > budget {
			res.Truncated = true
			return false
		}
		return true
	}
	if err := blob.ValidateTenant(tenant); err != nil {
		return res, fmt.Errorf("search: %w", err)
	}
	if strings.TrimSpace(session) == "" {
		return res, errors.New("search: session is empty")
	}
	if strings.TrimSpace(query) == "" {
		return res, errors.New("search: query is empty")
	}
	if limit <= 0 {
		limit = DefaultSearchLimit
	}
	limit = min(limit, MaxSearchLimit)
	// A quoted literal under (?i) folds case the Unicode way and reports
	// byte offsets into the original text.
	re, err := regexp.Compile("(?i)" + regexp.QuoteMeta(query))
	if err != nil {
		return res, fmt.Errorf("search: %w", err)
	}
	hits := &res.Hits
	full := func() bool { return len(*hits) >= limit || res.Truncated }

	offloads, err := s.Store.ListOffloads(ctx, tenant, session, true)
	if err != nil {
		return res, err
	}
	// The originals released offloads are looked up in, by run, parsed
	// once per search (nil: none).
	originals := map[string]*original{}
	for _, o := range offloads {
		if full() {
			return res, nil
		}
		if ownKey(tenant, o.Key) != nil {
			continue
		}
		data, err := s.Blob.Get(ctx, o.Key)
		if errors.Is(err, blob.ErrNotFound) {
			continue // deleted after its summary was committed
		}
		if err != nil {
			return res, fmt.Errorf("search offload %s: %w", o.Key, err)
		}
		if !spend(len(data)) {
			return res, nil
		}
		if h, ok := find(re, string(data)); ok {
			h.Key, h.Kind, h.RunID, h.Message, h.canon = o.Key, HitOffload, o.RunID, -1, -1
			if h.ID, err = s.offloadID(ctx, tenant, session, o, originals); err != nil {
				return res, err
			}
			*hits = append(*hits, h)
		}
	}

	runs, err := s.allRuns(ctx, store.RunFilter{Tenant: tenant, Session: session}, 0)
	if err != nil {
		return res, err
	}
	searched := map[string]bool{}
	for _, r := range runs {
		if full() {
			break
		}
		// Archives are content-addressed: a replay archives the same key.
		if r.ArchiveKey == "" || searched[r.ArchiveKey] {
			continue
		}
		searched[r.ArchiveKey] = true
		data, err := s.archive(ctx, r)
		if errors.Is(err, blob.ErrNotFound) {
			continue
		}
		if err != nil {
			return res, fmt.Errorf("search: %w", err)
		}
		if !spend(len(data)) {
			return res, nil
		}
		for _, h := range searchArchive(re, data) {
			if full() {
				break
			}
			h.Key, h.Kind, h.RunID = r.ArchiveKey, HitArchive, r.ID
			if h.canon >= 0 && r.ArchiveSHA256 != "" {
				h.ID = recoverid.Range(r.ArchiveSHA256, h.canon, h.canon).String()
			}
			*hits = append(*hits, h)
		}
	}
	return res, nil
}

// offloadID is the recover id of an offload found by a search: its own
// id while it is live; once released (its summary restored it), the
// archive id of the tool result it was in the original of the run that
// offloaded it, when that original holds a result with its digest.
func (s *Service) offloadID(ctx context.Context, tenant, session string, o store.Offload, originals map[string]*original) (string, error) {
	_, _, sha, err := blob.ParseContentKey(o.Key)
	if err != nil {
		return "", nil
	}
	if o.DeletedAt.IsZero() {
		return sha, nil
	}
	if o.RunID == "" {
		return "", nil
	}
	orig, seen := originals[o.RunID]
	if !seen {
		var err error
		if orig, err = s.runOriginal(ctx, tenant, session, o.RunID); err != nil {
			return "", err
		}
		originals[o.RunID] = orig
	}
	if orig == nil {
		return "", nil
	}
	if at, found := findResult(orig.conv, sha); found {
		return recoverid.BlockOf(orig.sha, at[0], at[1]).String(), nil
	}
	return "", nil
}

// original is a run's archived original, parsed.
type original struct {
	sha  string
	conv conversation.Conversation
}

// runOriginal reads and parses the archived original of run id when it is
// a run of this tenant and session; nil when there is none.
func (s *Service) runOriginal(ctx context.Context, tenant, session, id string) (*original, error) {
	r, err := s.Store.GetRun(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if r.Tenant != tenant || r.Session != session || r.ArchiveKey == "" {
		return nil, nil
	}
	data, err := s.archive(ctx, r)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	conv, err := conversation.ParseAny(data)
	if err != nil {
		return nil, nil
	}
	return &original{sha: r.ArchiveSHA256, conv: conv}, nil
}

// searchArchive searches each message of a conversation; an archive that
// no longer parses is searched as raw text.
func searchArchive(re *regexp.Regexp, data []byte) []Hit {
	conv, err := conversation.ParseAny(data)
	if err != nil {
		if h, ok := find(re, string(data)); ok {
			h.Message, h.canon = -1, -1
			return []Hit{h}
		}
		return nil
	}
	pos := conv.CallerIndexes()
	var hits []Hit
	for i, m := range conv.Messages {
		var sb strings.Builder
		for _, blk := range m.Blocks {
			for _, part := range []string{blk.Text, blk.Input} {
				if part != "" {
					if sb.Len() > 0 {
						sb.WriteByte('\n')
					}
					sb.WriteString(part)
				}
			}
		}
		if h, ok := find(re, sb.String()); ok {
			h.Message, h.canon = pos[i], i
			hits = append(hits, h)
		}
	}
	return hits
}

// find counts the matches in text and cuts an excerpt around the first.
func find(re *regexp.Regexp, text string) (Hit, bool) {
	loc := re.FindStringIndex(text)
	if loc == nil {
		return Hit{}, false
	}
	h := Hit{Matches: 1, Excerpt: excerpt(text, loc[0], loc[1], excerptRadius)}
	// One match at a time, never the list of all of them.
	for off := max(loc[1], loc[0]+1); off < len(text); {
		next := re.FindStringIndex(text[off:])
		if next == nil {
			break
		}
		if h.Matches == MaxCountedMatches {
			h.MatchesCapped = true
			break
		}
		h.Matches++
		off += max(next[1], next[0]+1)
	}
	return h, true
}

// excerpt returns text[start:end] with up to radius characters on each
// side, marking cut ends with "…".
func excerpt(text string, start, end, radius int) string {
	from := start
	for n := 0; n < radius && from > 0; n++ {
		_, size := utf8.DecodeLastRuneInString(text[:from])
		from -= size
	}
	to := end
	for n := 0; n < radius && to < len(text); n++ {
		_, size := utf8.DecodeRuneInString(text[to:])
		to += size
	}
	out := text[from:to]
	if from > 0 {
		out = "…" + out
	}
	if to < len(text) {
		out += "…"
	}
	return out
}
