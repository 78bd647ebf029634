package contract

// DeliveryWorkflow tells a tenant's webhook endpoints that a run reached
// its final state. The Compaction workflow starts it as an abandoned
// child, so that a delivery retried for hours never holds up the
// session's next run.
const DeliveryWorkflow = "WebhookDelivery"

// DeliveryWorkflowID is the id of run's delivery workflow: one per run,
// so that a run's final state is announced once. A manual redelivery
// runs under RedeliveryWorkflowID.
func DeliveryWorkflowID(runID string) string {
	return "webhook/" + runID
}

// RedeliveryWorkflowID is the id of a manual redelivery of delivery id;
// attempt tells successive redeliveries apart.
func RedeliveryWorkflowID(deliveryID, attempt string) string {
	return "webhook-redeliver/" + deliveryID + "/" + attempt
}

// DeliveryInput starts a DeliveryWorkflow: the run whose final state is
// told (its outcome is read from Postgres when each attempt is sent), or
// one delivery to send again.
type DeliveryInput struct {
	Tenant string `json:"tenant"`
	RunID  string `json:"run_id"`
	// DeliveryID, when set, sends that delivery again (manual
	// redelivery) instead of preparing the run's deliveries.
	DeliveryID string `json:"delivery_id,omitempty"`
	// Event is the event told: "" is the run's final state
	// ("run.<status>"); EventPromoted tells that a replay became its
	// session's state.
	Event string `json:"event,omitempty"`
}

// EventPromoted is the webhook event of a promoted replay: the agent's
// platform should continue from this run's output.
const EventPromoted = "run.promoted"

// PromotionWorkflowID is the id of the delivery workflow that tells of
// run's promotion: one per run, as a run is promoted once.
func PromotionWorkflowID(runID string) string {
	return "webhook-promoted/" + runID
}
