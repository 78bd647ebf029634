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
	if !(req.Days > 0) || math.IsInf(req.Days, 0) || req.Days > 36500 {
		return badRequest("days", "days: a number of days above 0 and at most 36500 (fractions allowed)")
	}
	if err := a.deps.Store.SetRetention(r.Context(), tenant, req.Days); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, retentionSetting{Days: req.Days, Set: true})
	return nil
}
