package activities

import (
	"context"
	"fmt"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/recoverid"
)

// Every cut names what recover_context gives back: an id into the run's
// archived original (package recoverid). A step that cuts places the
// working conversation it cuts in that original (recoverid.Align) and
// writes the id of the range or block. Only ids leave the activity, in
// the conversation it saves: no text goes to the workflow or the logs.

// runArchive is the key and SHA-256 of the run's archived original: key
// when the workflow passed it, else what the run's row recorded (the plan
// step records it before any pass runs; ApplyResults, whose input names
// no archive, reads it there). ok is false when the run has none.
func (a *Activities) runArchive(ctx context.Context, run contract.Run, key string) (string, string, bool, error) {
	if key == "" {
		r, err := a.Store.GetRun(ctx, run.ID)
		if err != nil {
			return "", "", false, storeErr(fmt.Errorf("read run archive: %w", err))
		}
		key = r.ArchiveKey
	}
	if key == "" {
		return "", "", false, nil
	}
	owner, kind, sha, err := blob.ParseContentKey(key)
	if err != nil || owner != run.Tenant || kind != blob.KindArchive {
		return "", "", false, nil
	}
	return key, sha, true, nil
}

// original reads and parses the run's archived original (cached: it is
// the run's input, which plan parsed).
func (a *Activities) original(ctx context.Context, run contract.Run, archiveKey string) (conversation.Conversation, string, bool, error) {
	key, sha, ok, err := a.runArchive(ctx, run, archiveKey)
	if err != nil || !ok {
		return conversation.Conversation{}, "", false, err
	}
	orig, _, err := a.load(ctx, run.Tenant, key)
	if err != nil {
		return conversation.Conversation{}, "", false, err
	}
	return orig, sha, true, nil
}

// recoverMap places work in the run's archived original; ok is false when
// the run has none (nothing can be named then).
func (a *Activities) recoverMap(ctx context.Context, run contract.Run, archiveKey string, work conversation.Conversation) (recoverid.Map, bool, error) {
	orig, sha, ok, err := a.original(ctx, run, archiveKey)
	if err != nil || !ok {
		return recoverid.Map{}, false, err
	}
	return recoverid.Align(orig, work, sha), true, nil
}

// blockIDs is recoverMap as the function the passes take: the id of the
// original of the block at (msg, block) of work.
func blockIDs(m recoverid.Map) func(msg, block int) string {
	return func(msg, block int) string {
		id, ok := m.Block(msg, block)
		if !ok {
			return ""
		}
		return id.String()
	}
}
