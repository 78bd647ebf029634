package activities

import (
	"context"
	"errors"

	"github.com/ctxcompact/orchestrator/internal/metrics"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// AdmissionStore is what admission asks of Postgres (a *store.Store in a
// worker).
type AdmissionStore interface {
	Admit(ctx context.Context, tenant, runID string, bound int) (store.Admission, error)
}

var _ AdmissionStore = (*store.Store)(nil)

// Admission is the step that admits a tenant's runs under its bound of
// runs in flight.
type Admission struct {
	// Store is Postgres (a *store.Store in a worker; nil: every run is
	// admitted at once).
	Store AdmissionStore
	// TenantRunsInFlight bounds a tenant's runs in flight
	// (TENANT_RUNS_IN_FLIGHT; 0: no bound).
	TenantRunsInFlight int
	// Metrics receive the admission waits (nil: none).
	Metrics *metrics.Metrics
}

// AdmitInput asks for a session's next run to be admitted (RunID), or,
// with RunID empty, only for the slot a run of the session freed to go
// to the tenant's oldest waiting run.
type AdmitInput struct {
	Tenant string `json:"tenant"`
	RunID  string `json:"run_id,omitempty"`
}

// AdmitResult says whether the run may start, and which other runs of the
// tenant to tell (contract.AdmitSignal), with their sessions: those this
// call admitted, and those admitted before and still pending, named again
// at most once per period (store.Admission.Others).
type AdmitResult struct {
	Admitted bool          `json:"admitted"`
	Others   []AdmittedRun `json:"others,omitempty"`
}

// AdmittedRun is another session's run an Admit call admitted or named
// again.
type AdmittedRun struct {
	RunID   string `json:"run_id"`
	Session string `json:"session"`
}

// Admit admits runs of a tenant under TENANT_RUNS_IN_FLIGHT
// (store.Admit); without a bound (or a store) every run is admitted and
// nothing is written. A local activity of the session workflow: it
// takes no slot while the run waits, since the wait is the session's.
func (ad *Admission) Admit(ctx context.Context, in AdmitInput) (AdmitResult, error) {
	if ad.TenantRunsInFlight < 1 || ad.Store == nil {
		return AdmitResult{Admitted: in.RunID != ""}, nil
	}
	if in.Tenant == "" {
		return AdmitResult{}, badInput(errors.New("admit: empty tenant"))
	}
	got, err := ad.Store.Admit(ctx, in.Tenant, in.RunID, ad.TenantRunsInFlight)
	if err != nil {
		return AdmitResult{}, storeErr(err)
	}
	ad.Metrics.Admission(got.Waited, got.Retold)
	res := AdmitResult{Admitted: got.Admitted}
	for _, o := range got.Others {
		res.Others = append(res.Others, AdmittedRun{RunID: o.RunID, Session: o.Session})
	}
	return res, nil
}
