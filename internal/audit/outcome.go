package audit

import (
	"context"

	"github.com/ctxcompact/orchestrator/contract"
)

// RunOutcome is the outcome of run runID of tenant, read from its row
// and stats (store.OutcomeOf); another tenant's run is store.ErrNotFound.
func (s *Service) RunOutcome(ctx context.Context, tenant, runID string) (contract.Outcome, error) {
	r, err := s.run(ctx, tenant, runID)
	if err != nil {
		return contract.Outcome{}, err
	}
	return r.Outcome()
}
