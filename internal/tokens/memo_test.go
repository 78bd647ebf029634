package tokens

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// countingCounter counts how often it is asked.
type countingCounter struct {
	Counter
	mu    sync.Mutex
	calls int
}

func (c *countingCounter) Count(s string) int {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.Counter.Count(s)
}

func TestMemoCountsEachLongTextOnce(t *testing.T) {
	t.Parallel()
	base, err := New(O200kBase)
	require.NoError(t, err)
	inner := &countingCounter{Counter: base}
	m := NewMemo(inner)
	long := strings.Repeat("a tool result line with /src/file.go:42\n", 20)
	want := base.Count(long)

	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.Equal(t, want, m.Count(long))
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, inner.calls, 8, "concurrent first calls may each count")
	before := inner.calls
	require.Equal(t, want, m.Count(long))
	require.Equal(t, before, inner.calls, "a remembered text is not counted again")

	require.Equal(t, base.Count("short"), m.Count("short"))
	require.Equal(t, base.Count("short"), m.Count("short"))
	require.Equal(t, before+2, inner.calls, "short texts are not remembered")
	require.Equal(t, O200kBase, m.Name())
}
