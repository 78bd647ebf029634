package activities

import (
	"context"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// RunStore is what the activities ask of Postgres: exactly the methods
// of *store.Store they call, so that a test can hand them an in-memory
// one.
type RunStore interface {
	// Runs.
	GetRun(ctx context.Context, id string) (store.Run, error)
	StartRun(ctx context.Context, id, tenant, session string, st store.RunStart) error
	CommitRun(ctx context.Context, id string, res store.RunResult) (store.Commit, error)
	FailRun(ctx context.Context, id string, f store.Failure, steps ...store.Step) (bool, error)

	// A run's history.
	RecordStep(ctx context.Context, steps ...store.Step) error
	RecordDrift(ctx context.Context, verdicts ...store.Drift) error

	// Sessions: watermark and offloads.
	GetWatermark(ctx context.Context, tenant, session string) (string, error)
	WatermarkSeenBy(ctx context.Context, tenant, session, runID string) (string, error)
	SetWatermark(ctx context.Context, tenant, session, toolUseID, runID string) error
	AddOffload(ctx context.Context, o store.Offload) error
	ListOffloads(ctx context.Context, tenant, session string, includeDeleted bool) ([]store.Offload, error)
	LiveOffloads(ctx context.Context, tenant, session string, keys []string) (map[string]bool, error)
	ReleaseOffloads(ctx context.Context, tenant, session string, keys []string,
		del func(ctx context.Context, key string) error) (int, []string, error)
	// The session's append-only summary log, and its latest output.
	SessionLog(ctx context.Context, tenant, session string) ([]store.LogBlock, error)
	LatestOutput(ctx context.Context, tenant, session string) (store.Output, error)
}

// ObjectStore is what the activities ask of S3: exactly the methods of
// *blob.Store they call. Content is addressed by blob.ContentKey.
type ObjectStore interface {
	Get(ctx context.Context, key string) ([]byte, error)
	GetString(ctx context.Context, key string) (string, error)
	GetVerified(ctx context.Context, key, wantSHA string) ([]byte, error)
	PutContent(ctx context.Context, tenant, kind string, data []byte) (blob.Ref, error)
	PutContentString(ctx context.Context, tenant, kind, text string) (blob.Ref, error)
	// A run's intermediates, under its own prefix (blob.RunContentKey).
	PutRunContent(ctx context.Context, tenant, runID, kind string, data []byte) (blob.Ref, error)
	PutRunContentString(ctx context.Context, tenant, runID, kind, text string) (blob.Ref, error)
	DeletePrefix(ctx context.Context, prefix string) (int, error)
	Delete(ctx context.Context, key string) error
}

// The real stores are the ones the worker runs with.
var (
	_ RunStore    = (*store.Store)(nil)
	_ ObjectStore = (*blob.Store)(nil)
)
