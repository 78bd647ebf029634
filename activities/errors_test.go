package activities

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/internal/blob"
)

// TestClassify: every activity error ends classified once; an error no
// dependency classified is a bug or bad input and stops the run at once.
func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		err       error
		wantType  string
		retryable bool
	}{
		{"plain error", errors.New("render output: unexpected shape"), ErrInternal, false},
		{"wrapped plain error", fmt.Errorf("write compression stats: %w", errors.New("no place")), ErrInternal, false},
		{"S3 timeout retries", blobErr(fmt.Errorf("read x: %w", context.DeadlineExceeded)), ErrUnavailable, true},
		{"S3 not found stops", blobErr(fmt.Errorf("read x: %w", blob.ErrNotFound)), ErrDependency, false},
		{"bad input stays bad input", badInput(errors.New("message 3: field content")), ErrBadInput, false},
		{"config stays config", config(errors.New("unknown stage")), ErrConfig, false},
		{"wrapped retryable keeps its class outside", fmt.Errorf("read input: %w", blobErr(context.DeadlineExceeded)), ErrUnavailable, true},
		{"wrapped bad input keeps its class outside", fmt.Errorf("read input: %w", badInput(errors.New("not ours"))), ErrBadInput, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := classify(tt.err)
			app, ok := got.(*temporal.ApplicationError)
			require.True(t, ok, "the outermost error is the classified one: %T", got)
			require.Equal(t, tt.wantType, app.Type())
			require.Equal(t, !tt.retryable, app.NonRetryable())
			require.Contains(t, got.Error(), tt.err.Error(), "the message is kept")
		})
	}
	require.NoError(t, classify(nil))
	require.ErrorIs(t, classify(context.Canceled), context.Canceled, "a cancellation is not an error to classify")
}

func TestChunkCharsBoundsTheChunks(t *testing.T) {
	t.Parallel()
	require.Equal(t, 50000, chunkChars(300000, 50000), "the preset's size when it makes few chunks")
	n := 30 << 20
	size := chunkChars(n, 10)
	require.LessOrEqual(t, (n+size-1)/size, MaxChunks, "a 30 MB result makes at most MaxChunks chunks")
}
