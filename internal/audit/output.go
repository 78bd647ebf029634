package audit

import (
	"context"
	"fmt"

	"github.com/ctxcompact/orchestrator/internal/blob"
)

// Output returns the compacted conversation of a committed run of tenant
// (succeeded or over_limit) exactly as it was stored, after checking it
// against the sha256 recorded on the run. A run without an output is
// ErrNoOutput; a run of another tenant is store.ErrNotFound.
func (s *Service) Output(ctx context.Context, tenant, runID string) ([]byte, error) {
	r, err := s.run(ctx, tenant, runID)
	if err != nil {
		return nil, err
	}
	return s.output(ctx, r)
}

// Verified reads the object at key, a run's output or handoff as its
// outcome names it, after checking that key is tenant's (a key from a
// row is still not trusted as a pointer) and then the bytes against
// sha256. Both the API and the web UI read runs' objects through it.
func (s *Service) Verified(ctx context.Context, tenant, key, sha256 string) ([]byte, error) {
	if err := blob.CheckOwned(tenant, key); err != nil {
		return nil, err
	}
	data, err := s.Blob.GetVerified(ctx, key, sha256)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return data, nil
}
