package contract

// EraseWorkflow erases one session of one tenant: it waits until the
// session's runs are final, then deletes its rows and its objects and
// finishes the erasure's tombstone.
const EraseWorkflow = "SessionErasure"

// EraseWorkflowID is the id of erasure erasureID's workflow: starting it
// twice starts it once.
func EraseWorkflowID(erasureID string) string {
	return "erase/" + erasureID
}

// EraseInput names the erasure and its session.
type EraseInput struct {
	ErasureID string `json:"erasure_id"`
	Tenant    string `json:"tenant"`
	Session   string `json:"session"`
}

// EraseResult is what an erasure deleted.
type EraseResult struct {
	Rows           int `json:"rows"`
	ObjectsDeleted int `json:"objects_deleted"`
	ObjectsKept    int `json:"objects_kept"`
	// Executions counts the Temporal executions deleted.
	Executions int `json:"executions,omitempty"`
}
