package audit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/recoverid"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// The recovery API (the recover_context and search_context tools), shared
// by the HTTP API (GET /v1/sessions/{session}/offloads/{id} and
// /search) and the MCP server, so that both check ids and sessions the
// same way.

// Codes of a RecoverError.
const (
	// RecoverNotFound: the id names nothing this tenant and session may
	// read (malformed ids included).
	RecoverNotFound = "not_found"
	// RecoverBadLines: the line range is not one such as 1-200.
	RecoverBadLines = "bad_lines"
	// RecoverPastEnd: the line range starts past the end of the text.
	RecoverPastEnd = "past_end"
)

// RecoverError is a recovery the caller got wrong: an id that names
// nothing, or a bad line range. Field names the argument ("id", "lines",
// or "" for an id that is well formed but unknown); Message is safe to
// show. A RecoverNotFound error is also store.ErrNotFound.
type RecoverError struct {
	Code    string
	Field   string
	Message string
	// TotalLines is the text's line count, for the line range errors.
	TotalLines int
}

func (e *RecoverError) Error() string { return e.Message }

// Is makes a RecoverNotFound error match store.ErrNotFound.
func (e *RecoverError) Is(target error) bool {
	return target == store.ErrNotFound && e.Code == RecoverNotFound
}

// Recovered is what a recover id names, or the asked line range of it.
type Recovered struct {
	// Data is the text, byte for byte (the whole, or lines From to To).
	Data []byte
	// TotalLines is how many lines the whole text has.
	TotalLines int
	// From and To are the 1-based inclusive line range answered; zero
	// when the whole text is.
	From, To int
}

// RecoverContext reads what a recover id names, for tenant and session
// only:
//
//   - an offload id (the SHA-256 of an offloaded tool result): the result
//     byte for byte, only for an offload the store recorded for this
//     tenant and session: from its object while it is live, from the
//     original of the run that offloaded it once a summary released it;
//   - an archive id (see package recoverid: "<sha>.m<i>-<j>", messages i
//     to j of an archived original, or "<sha>.m<i>b<k>", one block): the
//     messages as a transcript or the block's text verbatim, only when a
//     run of this tenant and session recorded that archive.
//
// Anything else, malformed ids included, is a RecoverNotFound error.
// lines, when not empty, is "A-B" or "A" (1-based, inclusive): the answer
// is that slice; a range that starts past the end is a RecoverPastEnd
// error naming the text's line count. On line range errors the returned
// Recovered still carries TotalLines.
func (s *Service) RecoverContext(ctx context.Context, tenant, session, id, lines string) (Recovered, error) {
	// An erased session answers with its erasure, not as unknown.
	if err := s.Store.CheckSessionGone(ctx, tenant, session); err != nil {
		return Recovered{}, err
	}
	var data []byte
	var err error
	if blob.ValidateSHA256(id) == nil {
		data, err = s.offloaded(ctx, tenant, session, id)
	} else {
		rid, perr := recoverid.Parse(id)
		if perr != nil {
			return Recovered{}, &RecoverError{Code: RecoverNotFound, Field: "id",
				Message: "id: not found (an id is an offload's SHA-256, or an archive id such as <sha256>.m3-7 or <sha256>.m4b1)"}
		}
		data, err = s.archived(ctx, tenant, session, rid)
	}
	if err != nil {
		return Recovered{}, err
	}
	text := string(data)
	out := Recovered{Data: data, TotalLines: CountLines(text)}
	if lines == "" {
		return out, nil
	}
	from, to, ok := ParseLines(lines)
	if !ok {
		return Recovered{TotalLines: out.TotalLines}, &RecoverError{Code: RecoverBadLines, Field: "lines", TotalLines: out.TotalLines,
			Message: fmt.Sprintf("lines: %q is not a range such as 1-200", lines)}
	}
	if from > out.TotalLines {
		return Recovered{TotalLines: out.TotalLines}, &RecoverError{Code: RecoverPastEnd, Field: "lines", TotalLines: out.TotalLines,
			Message: fmt.Sprintf("lines: %s starts past the end: the text has %d lines", lines, out.TotalLines)}
	}
	out.From, out.To = from, min(to, out.TotalLines)
	out.Data = []byte(LineRange(text, out.From, out.To))
	return out, nil
}

// offloaded reads an offload of the session, named by its id.
func (s *Service) offloaded(ctx context.Context, tenant, session, id string) ([]byte, error) {
	key := blob.ContentKey(tenant, blob.KindOffload, id)
	live, err := s.Store.LiveOffloads(ctx, tenant, session, []string{key})
	if err != nil {
		return nil, err
	}
	if !live[key] {
		// An offload a summary released is read back from the original
		// of the run that offloaded it, checked against its id.
		data, ok, err := s.ReleasedOffload(ctx, tenant, session, id)
		if err != nil {
			return nil, err
		}
		if ok {
			return data, nil
		}
		// A summary names the whole archived conversation by its id:
		// an archive of this session's runs is read back as the caller
		// sent it.
		if data, ok, err := s.wholeArchive(ctx, tenant, session, id); err != nil || ok {
			return data, err
		}
		return nil, &RecoverError{Code: RecoverNotFound, Message: "offload not found"}
	}
	data, err := s.Blob.GetVerified(ctx, key, id)
	if err != nil {
		return nil, fmt.Errorf("read offload: %w", err)
	}
	return data, nil
}

// wholeArchive reads the archived original of the session whose SHA-256
// is sha, checked against it; ok is false when no run of the session
// archived it.
func (s *Service) wholeArchive(ctx context.Context, tenant, session, sha string) ([]byte, bool, error) {
	key, ok, err := s.Store.SessionArchive(ctx, tenant, session, sha)
	if err != nil || !ok {
		return nil, false, err
	}
	owner, kind, got, err := blob.ParseContentKey(key)
	if err != nil || owner != tenant || kind != blob.KindArchive || got != sha {
		return nil, false, nil
	}
	data, err := s.Blob.GetVerified(ctx, key, sha)
	if err != nil {
		return nil, false, fmt.Errorf("read archive: %w", err)
	}
	return data, true, nil
}

// archived reads what an archive id names. The id is never a key: its
// digest is looked up among the archives the runs of this tenant and
// session recorded, and the key the store holds is read, checked against
// that digest.
func (s *Service) archived(ctx context.Context, tenant, session string, id recoverid.ID) ([]byte, error) {
	notFound := &RecoverError{Code: RecoverNotFound, Message: "archive not found"}
	key, ok, err := s.Store.SessionArchive(ctx, tenant, session, id.Archive)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, notFound
	}
	owner, kind, sha, err := blob.ParseContentKey(key)
	if err != nil || owner != tenant || kind != blob.KindArchive || sha != id.Archive {
		return nil, notFound
	}
	raw, err := s.Blob.GetVerified(ctx, key, sha)
	if err != nil {
		return nil, fmt.Errorf("read archive: %w", err)
	}
	conv, err := conversation.ParseAny(raw)
	if err != nil {
		return nil, fmt.Errorf("parse archive: %w", err)
	}
	text, err := recoverid.Text(conv, id)
	if errors.Is(err, recoverid.ErrOutOfRange) {
		return nil, &RecoverError{Code: RecoverNotFound, Field: "id",
			Message: fmt.Sprintf("id: %s is not in the archived conversation (it has %d messages)", id, len(conv.Messages))}
	}
	if err != nil {
		return nil, err
	}
	return []byte(text), nil
}

// SessionKnown reports whether the tenant has any run or offload in the
// session, so that an unknown session (or another tenant's) is not found
// rather than an empty answer.
func (s *Service) SessionKnown(ctx context.Context, tenant, session string) (bool, error) {
	runs, err := s.Store.ListRuns(ctx, store.RunFilter{Tenant: tenant, Session: session, Limit: 1})
	if err != nil {
		return false, err
	}
	if len(runs) > 0 {
		return true, nil
	}
	offloads, err := s.Store.ListOffloads(ctx, tenant, session, true)
	if err != nil {
		return false, err
	}
	return len(offloads) > 0, nil
}

// SearchSession is the recovery search of a known session (SearchScan):
// a session where the tenant has neither run nor offload is store.ErrNotFound.
// Hits is never nil.
func (s *Service) SearchSession(ctx context.Context, tenant, session, query string, limit int) (SearchResult, error) {
	if err := s.Store.CheckSessionGone(ctx, tenant, session); err != nil {
		return SearchResult{}, err
	}
	known, err := s.SessionKnown(ctx, tenant, session)
	if err != nil {
		return SearchResult{}, err
	}
	if !known {
		return SearchResult{}, fmt.Errorf("session %s: %w", session, store.ErrNotFound)
	}
	res, err := s.SearchScan(ctx, tenant, session, query, limit)
	if err != nil {
		return SearchResult{}, err
	}
	if res.Hits == nil {
		res.Hits = []Hit{}
	}
	return res, nil
}

// ParseLines reads a line range, "A-B" (1-based, inclusive) or "A" (one
// line).
func ParseLines(v string) (from, to int, ok bool) {
	a, b, found := strings.Cut(v, "-")
	from, err := strconv.Atoi(a)
	if err != nil || from < 1 {
		return 0, 0, false
	}
	to = from
	if found {
		if to, err = strconv.Atoi(b); err != nil || to < from {
			return 0, 0, false
		}
	}
	return from, to, true
}

// SplitLines cuts text into its lines, each with its line break; a final
// line break ends the last line rather than starting an empty one.
func SplitLines(text string) []string {
	if text == "" {
		return nil
	}
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// CountLines is how many lines text has (see SplitLines).
func CountLines(text string) int {
	if text == "" {
		return 0
	}
	n := strings.Count(text, "\n")
	if !strings.HasSuffix(text, "\n") {
		n++
	}
	return n
}

// LineRange returns lines from..to of text (1-based, inclusive), each
// with its line break; "" when from is past the end.
func LineRange(text string, from, to int) string {
	lines := SplitLines(text)
	if from < 1 || from > len(lines) {
		return ""
	}
	return strings.Join(lines[from-1:min(to, len(lines))], "")
}
