package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/proxy"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// proxySnapshots records the proxy's snapshots: the object in S3 (a
// content key of the tenant), its row in Postgres.
type proxySnapshots struct{ a *api }

// Record stores s's body and records it.
func (p proxySnapshots) Record(ctx context.Context, s proxy.Snapshot) error {
	sum := blob.SHA256Hex(s.Body)
	key := blob.ContentKey(s.Tenant, blob.KindSnapshot, sum)
	if key == "" {
		return fmt.Errorf("record snapshot: tenant %q cannot name an object", s.Tenant)
	}
	_, err := p.a.deps.Store.AddSnapshot(ctx, store.Snapshot{Tenant: s.Tenant, Session: s.Session, Wire: s.Wire,
		From: s.From, To: s.To, Base: s.Base, Digest: s.Digest, Key: key, SHA256: sum, Bytes: int64(len(s.Body))},
		func(ctx context.Context) error {
			_, err := p.a.deps.Blob.PutContent(ctx, s.Tenant, blob.KindSnapshot, s.Body)
			return err
		})
	if errors.Is(err, store.ErrSnapshotBase) {
		return fmt.Errorf("%w: %w", proxy.ErrSnapshotBase, err)
	}
	return err
}

// Latest is where the session's newest snapshot ended.
func (p proxySnapshots) Latest(ctx context.Context, tenant, session string) (int, string, error) {
	return p.a.deps.Store.LatestSnapshot(ctx, tenant, session)
}

// snapshotInfo is one snapshot as the API lists it: what it holds, never
// the text.
type snapshotInfo struct {
	Seq int64 `json:"seq"`
	// Wire is the host's API: anthropic-messages, openai-chat or
	// openai-responses.
	Wire string `json:"wire"`
	// From and To are the host's messages it adds (counted from 1, the
	// host's transient messages aside); From 1 starts a chain.
	From int `json:"from_message"`
	To   int `json:"to_message"`
	// Extends is the seq of the snapshot this one adds to (0: none).
	Extends   int64     `json:"extends,omitempty"`
	SHA256    string    `json:"sha256"`
	Bytes     int64     `json:"bytes"`
	CreatedAt time.Time `json:"created_at"`
}

type snapshotList struct {
	Snapshots []snapshotInfo `json:"snapshots"`
}

// snapshotConversation is a snapshot's conversation as the host sent
// it: its chain's records joined.
type snapshotConversation struct {
	Seq  int64  `json:"seq"`
	Wire string `json:"wire"`
	// Complete is false when the chain's first records went under
	// retention: Messages then start at FromMessage, not at 1.
	Complete    bool              `json:"complete"`
	FromMessage int               `json:"from_message"`
	System      json.RawMessage   `json:"system,omitempty"`
	Messages    []json.RawMessage `json:"messages"`
	// Records are the seqs the conversation was read from, oldest first.
	Records []int64 `json:"records"`
}

// listSnapshots lists the session's snapshots (GET
// /v1/sessions/{session}/snapshots).
func (a *api) listSnapshots(w http.ResponseWriter, r *http.Request, tenant string) error {
	snaps, err := a.deps.Store.ListSnapshots(r.Context(), tenant, r.PathValue("session"))
	if err != nil {
		return err
	}
	out := snapshotList{Snapshots: []snapshotInfo{}}
	byDigest := map[string]int64{}
	for _, s := range snaps {
		info := snapshotInfo{Seq: s.Seq, Wire: s.Wire, From: s.From, To: s.To, SHA256: s.SHA256, Bytes: s.Bytes, CreatedAt: s.CreatedAt}
		if s.Base != "" {
			info.Extends = byDigest[s.Base]
		}
		byDigest[s.Digest] = s.Seq
		out.Snapshots = append(out.Snapshots, info)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getSnapshot answers the session's conversation as the host sent it in
// snapshot {seq} (GET /v1/sessions/{session}/snapshots/{seq}), each
// record's object read back for the tenant and checked against the
// digest the store recorded.
func (a *api) getSnapshot(w http.ResponseWriter, r *http.Request, tenant string) error {
	seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
	if err != nil || seq <= 0 {
		return badRequest("seq", "seq %q: not a snapshot number (a positive integer from the session's list)", r.PathValue("seq"))
	}
	chain, err := a.deps.Store.SnapshotChain(r.Context(), tenant, r.PathValue("session"), seq)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("snapshot")
	}
	if err != nil && !errors.Is(err, store.ErrSnapshotIncomplete) {
		return err
	}
	out := snapshotConversation{Seq: seq, Wire: chain[len(chain)-1].Wire, Complete: err == nil, FromMessage: chain[0].From,
		Messages: []json.RawMessage{}}
	for _, s := range chain {
		if blob.CheckOwned(tenant, s.Key) != nil {
			return fmt.Errorf("snapshot %d names object %s, not the tenant's", s.Seq, s.Key)
		}
		data, err := a.deps.Blob.GetVerified(r.Context(), s.Key, s.SHA256)
		if err != nil {
			return fmt.Errorf("read snapshot %d: %w", s.Seq, err)
		}
		var rec struct {
			System   json.RawMessage   `json:"system"`
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(data, &rec); err != nil {
			return fmt.Errorf("read snapshot %d: %w", s.Seq, err)
		}
		if s.From == 1 {
			out.System = rec.System
		}
		out.Messages = append(out.Messages, rec.Messages...)
		out.Records = append(out.Records, s.Seq)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
