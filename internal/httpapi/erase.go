package httpapi

import (
	"net/http"
	"time"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// erasureRecord is a session's erasure as the API shows it: its tombstone.
type erasureRecord struct {
	ID             string     `json:"id"`
	Session        string     `json:"session"`
	Status         string     `json:"status"` // erasing, erased
	WorkflowID     string     `json:"workflow_id,omitempty"`
	RequestedBy    string     `json:"requested_by"`
	RequestedAt    time.Time  `json:"requested_at"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"`
	Runs           int        `json:"runs"`
	RowsDeleted    int        `json:"rows_deleted"`
	ObjectsDeleted int        `json:"objects_deleted"`
	ObjectsKept    int        `json:"objects_kept"`
	DeletedSHA256  []string   `json:"deleted_sha256"`
}

func erasureOf(e store.Erasure) erasureRecord {
	out := erasureRecord{ID: e.ID, Session: e.Session, Status: "erasing", RequestedBy: e.RequestedBy,
		RequestedAt: e.RequestedAt.UTC(), Runs: e.Runs, RowsDeleted: e.RowsDeleted, ObjectsDeleted: e.ObjectsDeleted,
		ObjectsKept: e.ObjectsKept, DeletedSHA256: e.DeletedSHA256}
	if out.DeletedSHA256 == nil {
		out.DeletedSHA256 = []string{}
	}
	if !e.FinishedAt.IsZero() {
		t := e.FinishedAt.UTC()
		out.FinishedAt, out.Status = &t, "erased"
	}
	return out
}

// deleteSession starts the erasure of a session (or joins the one under
// way) and answers 202 with its tombstone; GET /v1/erasures/{id} follows
// it.
func (a *api) deleteSession(w http.ResponseWriter, r *http.Request, tenant string) error {
	by := "api"
	if info, ok := r.Context().Value(infoKey{}).(*reqInfo); ok {
		by = "api request " + info.id
	}
	e, wf, err := a.deps.Gateway.EraseSession(r.Context(), tenant, r.PathValue("session"), by)
	if err != nil {
		return notFoundAs(err, "session")
	}
	out := erasureOf(e)
	out.WorkflowID = wf
	writeJSON(w, http.StatusAccepted, out)
	return nil
}

func (a *api) getErasure(w http.ResponseWriter, r *http.Request, tenant string) error {
	e, err := a.deps.Store.GetErasure(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		return notFoundAs(err, "erasure")
	}
	writeJSON(w, http.StatusOK, erasureOf(e))
	return nil
}
