package schema

import (
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// reFunction is one plpgsql or SQL function definition of a migration:
// its name and its whole text, up to the end of its body.
var reFunction = regexp.MustCompile(`(?is)create\s+(?:or\s+replace\s+)?(function\s+([a-z_]+)\s*\(.*?\$\$.*?\$\$;)`)

// definitions are the functions a migration's section defines, by name.
func definitions(section string) map[string]string {
	out := map[string]string{}
	for _, m := range reFunction.FindAllStringSubmatch(section, -1) {
		// From "function": "create" and "create or replace" put the
		// same routine.
		out[strings.ToLower(m[2])] = strings.Join(strings.Fields(strings.ToLower(m[1])), " ")
	}
	return out
}

// TestDownRestoresThePreviousDefinition: a routine redefined by a later
// migration is a whole copy (create or replace), and its down section puts
// back the one before. Each down section's definition of a routine must be
// the latest earlier migration's, white space aside: a copy that drifted
// would leave a database rolled back to a routine no migration wrote.
func TestDownRestoresThePreviousDefinition(t *testing.T) {
	t.Parallel()
	names, err := fs.Glob(FS, "*.sql")
	require.NoError(t, err)
	sort.Strings(names)
	latest := map[string]string{} // the routine as the migrations so far leave it
	checked := 0
	for _, name := range names {
		data, err := fs.ReadFile(FS, name)
		require.NoError(t, err)
		up, down, _ := strings.Cut(string(data), "---- create above / drop below ----")
		for fn, def := range definitions(down) {
			prev, ok := latest[fn]
			require.True(t, ok, "%s: its down section defines %s, which no earlier migration did", name, fn)
			require.Equal(t, prev, def, "%s: its down section's %s is not the one the migrations before it left", name, fn)
			checked++
		}
		for fn, def := range definitions(up) {
			latest[fn] = def
		}
	}
	require.Greater(t, checked, 5, "the down sections' routines were found")
}
