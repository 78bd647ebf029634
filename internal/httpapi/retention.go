package httpapi

import (
	"math"
	"net/http"
)

// retentionSetting is a tenant's retention: its final runs and their
// objects are deleted Days after they end (Set false: kept for good).
type retentionSetting struct {
	Days float64 `json:"days"`
	Set  bool    `json:"set"`
}

type retentionRequest struct {
	Days float64 `json:"days"`
}

func (a *api) getRetention(w http.ResponseWriter, r *http.Request, tenant string) error {
	days, ok, err := a.deps.Store.Retention(r.Context(), tenant)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, retentionSetting{Days: days, Set: ok})
	return nil
}

func (a *api) putRetention(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req retentionRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	// Whole days only: a fraction such as 1e-300 would make every final
	// run of the tenant due at the next sweep.
	const maxDays = 36500
	if req.Days < 1 || req.Days > maxDays || req.Days != math.Trunc(req.Days) {
		return badRequest("days", "days: a whole number of days from 1 to %d", maxDays)
	}
	if err := a.deps.Store.SetRetention(r.Context(), tenant, req.Days); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, retentionSetting{Days: req.Days, Set: true})
	return nil
}

// deleteRetention unsets the tenant's retention: its runs are kept for
// good again. It answers the setting as GET does; unsetting twice is fine.
func (a *api) deleteRetention(w http.ResponseWriter, r *http.Request, tenant string) error {
	if err := a.deps.Store.UnsetRetention(r.Context(), tenant); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, retentionSetting{})
	return nil
}
