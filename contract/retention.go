package contract

// RetentionWorkflow deletes, in batches, the runs past their tenant's
// retention: started by the RetentionSchedule.
const RetentionWorkflow = "RetentionSweep"

// RetentionScheduleID is the Temporal Schedule that starts the sweep.
const RetentionScheduleID = "retention-sweep"

// RetentionInput bounds one sweep.
type RetentionInput struct {
	// Batch is how many runs one listing takes (0: the default).
	Batch int `json:"batch,omitempty"`
}

// RetentionResult is what one sweep deleted.
type RetentionResult struct {
	Runs           int `json:"runs"`
	ObjectsDeleted int `json:"objects_deleted"`
	ObjectsKept    int `json:"objects_kept"`
	// Snapshots counts the proxy snapshot rows past retention deleted;
	// their objects are counted in ObjectsDeleted and ObjectsKept.
	Snapshots int `json:"snapshots,omitempty"`
}
