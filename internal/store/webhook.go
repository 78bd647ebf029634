package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Webhook is a tenant's registered endpoint. Secret is set only where the
// caller may see it (registration and rotation) and where a delivery
// signs with it.
type Webhook struct {
	ID          string
	Tenant      string
	URL         string
	Description string
	Secret      string
	// PreviousSecret still signs beside Secret until PreviousExpires, so
	// that receivers can switch after a rotation without a gap.
	PreviousSecret  string
	PreviousExpires time.Time
	CreatedAt       time.Time
	RotatedAt       time.Time
}

// Delivery is one run's final state told to one endpoint. ID is the
// `webhook-id` header: stable across retries and redeliveries.
type Delivery struct {
	ID          string
	Tenant      string
	EndpointID  string
	RunID       string
	EventType   string
	Status      string // pending, delivered, failed
	Attempts    int
	LastCode    int
	LastError   string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	DeliveredAt time.Time
	// Log is the attempts, oldest first (ListDeliveries fills it).
	Log []DeliveryAttempt
}

// DeliveryAttempt is one POST of a delivery.
type DeliveryAttempt struct {
	Attempt int
	At      time.Time
	// Code is the HTTP status answered, 0 when there was no answer.
	Code  int
	Error string
	// ResponsePrefix is the start of the response body (at most
	// MaxResponsePrefix bytes); the rest is never stored.
	ResponsePrefix string
	Duration       time.Duration
}

// MaxResponsePrefix bounds the response body kept per attempt.
const MaxResponsePrefix = 256

// Delivery states.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

func newID(prefix string) (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return prefix + hex.EncodeToString(b[:]), nil
}

// AddWebhook registers an endpoint for tenant. A URL the tenant already
// has a live endpoint for answers that endpoint, without its secret, and
// created false: registering twice never makes a second endpoint that
// would receive every run again under another secret.
func (s *Store) AddWebhook(ctx context.Context, tenant, url, description, secret string) (w Webhook, created bool, err error) {
	id, err := newID("wh_")
	if err != nil {
		return Webhook{}, false, fmt.Errorf("add webhook: %w", err)
	}
	w = Webhook{ID: id, Tenant: tenant, URL: url, Description: description, Secret: secret}
	// An operator may register an endpoint for a tenant with no run or
	// key yet.
	if _, err := s.pool.Exec(ctx, `insert into tenants (id) values ($1) on conflict do nothing`, tenant); err != nil {
		return Webhook{}, false, fmt.Errorf("add webhook for tenant %s: %w", tenant, err)
	}
	err = s.pool.QueryRow(ctx, `
		insert into webhook_endpoints (id, tenant_id, url, description, secret) values ($1, $2, $3, $4, $5)
		on conflict (tenant_id, url) where deleted_at is null do nothing
		returning created_at`, id, tenant, url, description, secret).Scan(&w.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		w, err = scanWebhook(s.pool.QueryRow(ctx, `select `+webhookColumns+` from webhook_endpoints
			where tenant_id = $1 and url = $2 and deleted_at is null`, tenant, url))
		w.Secret, w.PreviousSecret = "", ""
		if err != nil {
			return Webhook{}, false, fmt.Errorf("read webhook of tenant %s for its url: %w", tenant, err)
		}
		return w, false, nil
	}
	if err != nil {
		return Webhook{}, false, fmt.Errorf("add webhook for tenant %s: %w", tenant, err)
	}
	return w, true, nil
}

const webhookColumns = `id, tenant_id, url, description, secret, coalesce(previous_secret, ''),
	coalesce(previous_expires_at, 'epoch'), created_at, coalesce(rotated_at, 'epoch')`

func scanWebhook(row pgx.Row) (Webhook, error) {
	var w Webhook
	err := row.Scan(&w.ID, &w.Tenant, &w.URL, &w.Description, &w.Secret, &w.PreviousSecret,
		&w.PreviousExpires, &w.CreatedAt, &w.RotatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Webhook{}, ErrNotFound
	}
	if w.PreviousExpires.Unix() == 0 {
		w.PreviousExpires = time.Time{}
	}
	if w.RotatedAt.Unix() == 0 {
		w.RotatedAt = time.Time{}
	}
	return w, err
}

// ListWebhooks lists tenant's live endpoints, oldest first, without their
// secrets.
func (s *Store) ListWebhooks(ctx context.Context, tenant string) ([]Webhook, error) {
	rows, err := s.pool.Query(ctx, `select `+webhookColumns+` from webhook_endpoints
		where tenant_id = $1 and deleted_at is null order by created_at, id`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list webhooks of tenant %s: %w", tenant, err)
	}
	defer rows.Close()
	var out []Webhook
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, fmt.Errorf("list webhooks of tenant %s: %w", tenant, err)
		}
		w.Secret, w.PreviousSecret = "", ""
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list webhooks of tenant %s: %w", tenant, err)
	}
	return out, nil
}

// RotateWebhook gives tenant's endpoint id a new secret; the old one
// keeps signing beside it for overlap. ErrNotFound for another tenant's
// or a deleted endpoint.
func (s *Store) RotateWebhook(ctx context.Context, tenant, id, secret string, overlap time.Duration) (Webhook, error) {
	w, err := scanWebhook(s.pool.QueryRow(ctx, `
		update webhook_endpoints set previous_secret = secret, secret = $3,
			previous_expires_at = now() + $4 * interval '1 millisecond', rotated_at = now()
		where tenant_id = $1 and id = $2 and deleted_at is null
		returning `+webhookColumns, tenant, id, secret, overlap.Milliseconds()))
	if err != nil {
		return Webhook{}, fmt.Errorf("rotate webhook %s: %w", id, err)
	}
	return w, nil
}

// DeleteWebhook stops deliveries to tenant's endpoint id. Its delivery
// log stays. ErrNotFound for another tenant's or a deleted endpoint.
func (s *Store) DeleteWebhook(ctx context.Context, tenant, id string) error {
	tag, err := s.pool.Exec(ctx, `update webhook_endpoints set deleted_at = now()
		where tenant_id = $1 and id = $2 and deleted_at is null`, tenant, id)
	if err != nil {
		return fmt.Errorf("delete webhook %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete webhook %s: %w", id, ErrNotFound)
	}
	return nil
}

// HasWebhooks reports whether tenant has a live endpoint: a run of a
// tenant without one starts no delivery.
func (s *Store) HasWebhooks(ctx context.Context, tenant string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `select exists (select 1 from webhook_endpoints
		where tenant_id = $1 and deleted_at is null)`, tenant).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look up webhooks of tenant %s: %w", tenant, err)
	}
	return ok, nil
}

// PrepareDeliveries records one delivery of eventType for run runID to
// each of tenant's live endpoints, and returns every delivery of that run
// and event (those recorded by an earlier call included: it is safe to
// repeat).
func (s *Store) PrepareDeliveries(ctx context.Context, tenant, runID, eventType string) ([]Delivery, error) {
	op := "prepare deliveries of run " + runID
	rows, err := s.pool.Query(ctx, `select id from webhook_endpoints where tenant_id = $1 and deleted_at is null
		and not exists (select 1 from webhook_deliveries d where d.endpoint_id = webhook_endpoints.id
			and d.run_id = $2 and d.event_type = $3)`, tenant, runID, eventType)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	endpoints, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	for _, ep := range endpoints {
		id, err := newID("msg_")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		_, err = s.pool.Exec(ctx, `insert into webhook_deliveries (id, tenant_id, endpoint_id, run_id, event_type)
			values ($1, $2, $3, $4, $5) on conflict (endpoint_id, run_id, event_type) do nothing`,
			id, tenant, ep, runID, eventType)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
	}
	all, err := s.deliveries(ctx, `where d.tenant_id = $1 and d.run_id = $2 and d.event_type = $3`, tenant, runID, eventType)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return all, nil
}

const deliveryColumns = `d.id, d.tenant_id, d.endpoint_id, d.run_id, d.event_type, d.status, d.attempts,
	coalesce(d.last_code, 0), d.last_error, d.created_at, d.updated_at, coalesce(d.delivered_at, 'epoch')`

func (s *Store) deliveries(ctx context.Context, where string, args ...any) ([]Delivery, error) {
	rows, err := s.pool.Query(ctx, `select `+deliveryColumns+` from webhook_deliveries d `+where+` order by d.created_at, d.id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		var d Delivery
		if err := rows.Scan(&d.ID, &d.Tenant, &d.EndpointID, &d.RunID, &d.EventType, &d.Status, &d.Attempts,
			&d.LastCode, &d.LastError, &d.CreatedAt, &d.UpdatedAt, &d.DeliveredAt); err != nil {
			return nil, err
		}
		if d.DeliveredAt.Unix() == 0 {
			d.DeliveredAt = time.Time{}
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// DeliveryTarget returns delivery id and its endpoint (with its secrets),
// for the step that sends it. The endpoint may have been deleted since:
// deleted reports it.
func (s *Store) DeliveryTarget(ctx context.Context, id string) (d Delivery, w Webhook, deleted bool, err error) {
	ds, err := s.deliveries(ctx, `where d.id = $1`, id)
	if err != nil {
		return Delivery{}, Webhook{}, false, fmt.Errorf("read delivery %s: %w", id, err)
	}
	if len(ds) == 0 {
		return Delivery{}, Webhook{}, false, fmt.Errorf("read delivery %s: %w", id, ErrNotFound)
	}
	var deletedAt *time.Time
	err = s.pool.QueryRow(ctx, `select `+webhookColumns+`, deleted_at from webhook_endpoints where id = $1`, ds[0].EndpointID).
		Scan(&w.ID, &w.Tenant, &w.URL, &w.Description, &w.Secret, &w.PreviousSecret, &w.PreviousExpires,
			&w.CreatedAt, &w.RotatedAt, &deletedAt)
	if err != nil {
		return Delivery{}, Webhook{}, false, fmt.Errorf("read endpoint of delivery %s: %w", id, err)
	}
	return ds[0], w, deletedAt != nil, nil
}

// RecordAttempt logs one attempt of delivery id and updates its state:
// delivered when the endpoint accepted it, else still pending with the
// last code and error.
func (s *Store) RecordAttempt(ctx context.Context, id string, a DeliveryAttempt, delivered bool) error {
	a.Error = Storable(a.Error)
	a.ResponsePrefix = Storable(a.ResponsePrefix)
	if len(a.ResponsePrefix) > MaxResponsePrefix {
		a.ResponsePrefix = strings.ToValidUTF8(a.ResponsePrefix[:MaxResponsePrefix], "")
	}
	status := DeliveryPending
	if delivered {
		status = DeliveryDelivered
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("record attempt of delivery %s: %w", id, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var n int
	err = tx.QueryRow(ctx, `update webhook_deliveries set attempts = attempts + 1, last_code = nullif($2, 0), last_error = $3,
			status = case when status = 'delivered' then status else $4 end,
			delivered_at = case when $4 = 'delivered' and delivered_at is null then now() else delivered_at end,
			updated_at = now()
		where id = $1 returning attempts`, id, a.Code, a.Error, status).Scan(&n)
	if err != nil {
		return fmt.Errorf("record attempt of delivery %s: %w", id, err)
	}
	_, err = tx.Exec(ctx, `insert into webhook_attempts (delivery_id, attempt, code, error, response_prefix, duration_ms)
		values ($1, $2, nullif($3, 0), $4, $5, $6)`, id, n, a.Code, a.Error, a.ResponsePrefix, a.Duration.Milliseconds())
	if err != nil {
		return fmt.Errorf("record attempt of delivery %s: %w", id, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("record attempt of delivery %s: %w", id, err)
	}
	return nil
}

// FailDelivery marks delivery id failed for good (its retries ran out or
// its endpoint is gone), unless it was delivered.
func (s *Store) FailDelivery(ctx context.Context, id, reason string) error {
	_, err := s.pool.Exec(ctx, `update webhook_deliveries set status = 'failed', last_error = $2, updated_at = now()
		where id = $1 and status <> 'delivered'`, id, reason)
	if err != nil {
		return fmt.Errorf("fail delivery %s: %w", id, err)
	}
	return nil
}

// ListDeliveries returns the deliveries of tenant's run runID with their
// attempt logs (none for another tenant's run).
func (s *Store) ListDeliveries(ctx context.Context, tenant, runID string) ([]Delivery, error) {
	ds, err := s.deliveries(ctx, `where d.tenant_id = $1 and d.run_id = $2`, tenant, runID)
	if err != nil {
		return nil, fmt.Errorf("list deliveries of run %s: %w", runID, err)
	}
	for i := range ds {
		rows, err := s.pool.Query(ctx, `select attempt, at, coalesce(code, 0), error, response_prefix, duration_ms
			from webhook_attempts where delivery_id = $1 order by attempt`, ds[i].ID)
		if err != nil {
			return nil, fmt.Errorf("list attempts of delivery %s: %w", ds[i].ID, err)
		}
		for rows.Next() {
			var a DeliveryAttempt
			var ms int64
			if err := rows.Scan(&a.Attempt, &a.At, &a.Code, &a.Error, &a.ResponsePrefix, &ms); err != nil {
				rows.Close()
				return nil, fmt.Errorf("list attempts of delivery %s: %w", ds[i].ID, err)
			}
			a.Duration = time.Duration(ms) * time.Millisecond
			ds[i].Log = append(ds[i].Log, a)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("list attempts of delivery %s: %w", ds[i].ID, err)
		}
	}
	return ds, nil
}

// Redeliver sets tenant's delivery id pending again, for a manual
// redelivery with the same webhook-id. ErrNotFound for another tenant's.
func (s *Store) Redeliver(ctx context.Context, tenant, id string) (Delivery, error) {
	tag, err := s.pool.Exec(ctx, `update webhook_deliveries set status = 'pending', updated_at = now()
		where tenant_id = $1 and id = $2`, tenant, id)
	if err != nil {
		return Delivery{}, fmt.Errorf("redeliver %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return Delivery{}, fmt.Errorf("redeliver %s: %w", id, ErrNotFound)
	}
	ds, err := s.deliveries(ctx, `where d.id = $1`, id)
	if err != nil || len(ds) == 0 {
		return Delivery{}, fmt.Errorf("redeliver %s: read it back: %v", id, err)
	}
	return ds[0], nil
}
