package audit

import "context"

// Output returns the compacted conversation of a committed run of tenant
// (succeeded or over_limit) exactly as it was stored, after checking it
// against the sha256 recorded on the run. A run without an output is
// ErrNoOutput; a run of another tenant is ErrNotFound.
func (s *Service) Output(ctx context.Context, tenant, runID string) ([]byte, error) {
	r, err := s.run(ctx, tenant, runID)
	if err != nil {
		return nil, err
	}
	return s.output(ctx, r)
}
