package audit

import (
	"context"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// Outcome reads the outcome of run r from its row and stats
// (store.OutcomeOf).
func (s *Service) Outcome(_ context.Context, r store.Run) (contract.Outcome, error) {
	return r.Outcome()
}

// RunOutcome is the outcome of run runID of tenant (another tenant's run
// is store.ErrNotFound).
func (s *Service) RunOutcome(ctx context.Context, tenant, runID string) (contract.Outcome, error) {
	r, err := s.run(ctx, tenant, runID)
	if err != nil {
		return contract.Outcome{}, err
	}
	return s.Outcome(ctx, r)
}
