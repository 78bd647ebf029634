package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReady(t *testing.T) {
	t.Parallel()
	var code atomic.Int32
	code.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(int(code.Load())) }))
	t.Cleanup(srv.Close)
	run := func() error {
		cmd := newReady()
		cmd.SetArgs([]string{"--url", srv.URL})
		cmd.SetOut(&bytes.Buffer{})
		return cmd.Execute()
	}
	require.NoError(t, run())
	code.Store(http.StatusServiceUnavailable)
	require.ErrorContains(t, run(), "answered 503")
}
