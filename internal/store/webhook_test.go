package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// TestWebhookDeliveries: endpoints are tenant-scoped; a run's deliveries
// are recorded once per endpoint however often they are prepared; the
// attempt log numbers attempts across redeliveries; a rotation keeps the
// old secret for the overlap; a deleted endpoint gets no new delivery.
func TestWebhookDeliveries(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t)
	_, _, err := st.CreateRun(ctx, store.Run{ID: "run-1", Tenant: "acme", Session: "s1", EventID: "e1", Trigger: "manual",
		Preset: "adaptive", Status: store.RunSucceeded})
	require.NoError(t, err)

	w, _, err := st.AddWebhook(ctx, "acme", "https://hooks.example.com/a", "first", "whsec_b25l")
	require.NoError(t, err)
	_, _, err = st.AddWebhook(ctx, "other", "https://hooks.example.com/o", "", "whsec_b3RoZXI=")
	require.NoError(t, err)
	ok, err := st.HasWebhooks(ctx, "acme")
	require.NoError(t, err)
	require.True(t, ok)
	list, err := st.ListWebhooks(ctx, "acme")
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Empty(t, list[0].Secret, "a listed endpoint carries no secret")

	ds, err := st.PrepareDeliveries(ctx, "acme", "run-1", "run.succeeded")
	require.NoError(t, err)
	require.Len(t, ds, 1, "only the tenant's own endpoint")
	again, err := st.PrepareDeliveries(ctx, "acme", "run-1", "run.succeeded")
	require.NoError(t, err)
	require.Equal(t, ds[0].ID, again[0].ID, "prepared twice, recorded once")

	require.NoError(t, st.RecordAttempt(ctx, ds[0].ID, store.DeliveryAttempt{Code: 503, Error: "endpoint answered 503",
		ResponsePrefix: string(make([]byte, 1000))}, false))
	require.NoError(t, st.RecordAttempt(ctx, ds[0].ID, store.DeliveryAttempt{Code: 200}, true))
	_, err = st.Redeliver(ctx, "other", ds[0].ID)
	require.True(t, errors.Is(err, store.ErrNotFound), "another tenant cannot redeliver it")
	d, err := st.Redeliver(ctx, "acme", ds[0].ID)
	require.NoError(t, err)
	require.Equal(t, store.DeliveryPending, d.Status)
	require.NoError(t, st.RecordAttempt(ctx, ds[0].ID, store.DeliveryAttempt{Code: 200}, true))

	got, err := st.ListDeliveries(ctx, "acme", "run-1")
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, store.DeliveryDelivered, got[0].Status)
	require.Equal(t, 3, got[0].Attempts)
	require.Len(t, got[0].Log, 3)
	require.Equal(t, []int{1, 2, 3}, []int{got[0].Log[0].Attempt, got[0].Log[1].Attempt, got[0].Log[2].Attempt})
	require.Len(t, got[0].Log[0].ResponsePrefix, store.MaxResponsePrefix, "only a prefix of the answer is kept, NULs written as \\0")
	none, err := st.ListDeliveries(ctx, "other", "run-1")
	require.NoError(t, err)
	require.Empty(t, none)

	_, err = st.RotateWebhook(ctx, "other", w.ID, "whsec_bmV3", time.Hour)
	require.True(t, errors.Is(err, store.ErrNotFound))
	rotated, err := st.RotateWebhook(ctx, "acme", w.ID, "whsec_bmV3", time.Hour)
	require.NoError(t, err)
	require.Equal(t, "whsec_bmV3", rotated.Secret)
	require.Equal(t, "whsec_b25l", rotated.PreviousSecret)
	require.WithinDuration(t, time.Now().Add(time.Hour), rotated.PreviousExpires, time.Minute)

	require.True(t, errors.Is(st.DeleteWebhook(ctx, "other", w.ID), store.ErrNotFound))
	require.NoError(t, st.DeleteWebhook(ctx, "acme", w.ID))
	_, _, deleted, err := st.DeliveryTarget(ctx, ds[0].ID)
	require.NoError(t, err)
	require.True(t, deleted)
	ds, err = st.PrepareDeliveries(ctx, "acme", "run-1", "run.failed")
	require.NoError(t, err)
	require.Empty(t, ds, "a deleted endpoint gets no new delivery")
}

// TestAddWebhookIsIdempotentPerURL: the same URL registered twice is one
// endpoint (its secret shown only the first time); another tenant's same
// URL is its own; a deleted endpoint's URL can be registered anew.
func TestAddWebhookIsIdempotentPerURL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t)
	const url = "https://hooks.example.com/same"
	first, created, err := st.AddWebhook(ctx, "acme", url, "", "whsec_Zmlyc3Q=")
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "whsec_Zmlyc3Q=", first.Secret)

	again, created, err := st.AddWebhook(ctx, "acme", url, "", "whsec_c2Vjb25k")
	require.NoError(t, err)
	require.False(t, created, "the URL is already registered")
	require.Equal(t, first.ID, again.ID)
	require.Empty(t, again.Secret, "the secret is shown once, at registration")
	list, err := st.ListWebhooks(ctx, "acme")
	require.NoError(t, err)
	require.Len(t, list, 1)
	ds, err := st.Pool().Query(ctx, `select secret from webhook_endpoints where tenant_id = 'acme'`)
	require.NoError(t, err)
	secrets, err := pgx.CollectRows(ds, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"whsec_Zmlyc3Q="}, secrets, "the second secret was never stored")

	other, created, err := st.AddWebhook(ctx, "other", url, "", "whsec_b3RoZXI=")
	require.NoError(t, err)
	require.True(t, created, "another tenant's endpoint for the same URL is its own")
	require.NotEqual(t, first.ID, other.ID)

	require.NoError(t, st.DeleteWebhook(ctx, "acme", first.ID))
	renewed, created, err := st.AddWebhook(ctx, "acme", url, "", "whsec_dGhpcmQ=")
	require.NoError(t, err)
	require.True(t, created, "a deleted endpoint's URL registers anew")
	require.NotEqual(t, first.ID, renewed.ID)
}
