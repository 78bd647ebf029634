package audit

import (
	"context"
	"fmt"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/recoverid"
)

// ReleasedOffload reads back an offload of this tenant and session that a
// history summary released (its object deleted after the commit): the
// tool result it was, from the archived original of the run that
// offloaded it, when that original holds a result whose SHA-256 is sha,
// the offload's id. The bytes are then those of the offloaded result. ok
// is false for anything else: an id the session never offloaded, a live
// offload (read it from its object), an original that holds no such
// result.
func (s *Service) ReleasedOffload(ctx context.Context, tenant, session, sha string) (data []byte, ok bool, err error) {
	if blob.ValidateSHA256(sha) != nil {
		return nil, false, nil
	}
	key := blob.ContentKey(tenant, blob.KindOffload, sha)
	if key == "" {
		return nil, false, nil
	}
	offs, err := s.Store.ListOffloads(ctx, tenant, session, true)
	if err != nil {
		return nil, false, err
	}
	tried := map[string]bool{}
	for _, o := range offs {
		if o.Key != key {
			continue
		}
		if o.DeletedAt.IsZero() {
			return nil, false, nil // live: its object answers
		}
		if o.RunID == "" || tried[o.RunID] {
			continue
		}
		tried[o.RunID] = true
		orig, err := s.runOriginal(ctx, tenant, session, o.RunID)
		if err != nil {
			return nil, false, err
		}
		if orig == nil {
			continue
		}
		if at, found := findResult(orig.conv, sha); found {
			text, err := recoverid.Text(orig.conv, recoverid.BlockOf(orig.sha, at[0], at[1]))
			if err != nil {
				return nil, false, fmt.Errorf("released offload: %w", err)
			}
			return []byte(text), true, nil
		}
	}
	return nil, false, nil
}

// findResult finds the tool result whose text has the SHA-256 sha.
func findResult(c conversation.Conversation, sha string) ([2]int, bool) {
	for i, m := range c.Messages {
		for k, b := range m.Blocks {
			if b.Kind == conversation.KindToolResult && blob.SHA256Hex([]byte(b.Text)) == sha {
				return [2]int{i, k}, true
			}
		}
	}
	return [2]int{}, false
}
