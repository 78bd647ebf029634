package cachebill

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPriceReadsTheSharedStartAndWritesTheRest(t *testing.T) {
	t.Parallel()
	require.InDelta(t, 10*Write, Price(nil, []byte("0123456789")), 1e-9)
	require.InDelta(t, 8*Read+4*Write, Price([]byte("0123456789"), []byte("01234567ab89")), 1e-9)
	var b Bill
	b.Add([]byte("abcd"), []byte("abcd"))
	b.Add([]byte("abcdef"), []byte("abcdefgh"))
	require.InDelta(t, 4*Write+4*Read+2*Write, b.Proxied, 1e-9)
	require.InDelta(t, 4*Write+4*Read+4*Write, b.Whole, 1e-9)
	require.Less(t, b.Ratio(), 1.0)
}
