package devstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ctxcompact/orchestrator/internal/config"
)

const (
	// devDatabase is created in the cluster this package starts.
	devDatabase = "compactor"
	// fallbackURL is tried when no Postgres binaries are installed.
	fallbackURL = config.DefaultDatabaseURL
	// fallbackDatabase is created on the fallback server, named apart from
	// anything a developer may already keep there.
	fallbackDatabase = "compactor_dev"
	// pgUser is the superuser initdb creates and the OS user postgres runs
	// as when we are root (postgres refuses to run as root).
	pgUser = "postgres"
	// maxSocketPath is sun_path's size on Linux minus the NUL.
	maxSocketPath    = 107
	pgConnectTimeout = 5 * time.Second
)

// startPostgres returns a database URL: databaseURL itself when set (after a
// ping), else a cluster under Dir/pg started from the local binaries, else
// the conventional local server. The stop function is a no-op unless this
// package started the server.
func startPostgres(ctx context.Context, dir, databaseURL string, port int) (string, func() error, error) {
	noop := func() error { return nil }
	if databaseURL != "" {
		if err := pingDB(ctx, databaseURL); err != nil {
			return "", nil, fmt.Errorf("database URL: %w", err)
		}
		return databaseURL, noop, nil
	}

	binDir, found := findPostgresBin()
	if !found {
		url, err := useFallbackServer(ctx)
		if err != nil {
			return "", nil, fmt.Errorf("no PostgreSQL binaries (initdb, pg_ctl) in PATH or /usr/lib/postgresql/*/bin, "+
				"and no server at %s (%w): set DATABASE_URL (Options.DatabaseURL) to a Postgres database", fallbackURL, err)
		}
		return url, noop, nil
	}

	c, err := newCluster(dir, binDir)
	if err != nil {
		return "", nil, err
	}
	if err := c.start(ctx, port); err != nil {
		return "", nil, err
	}
	url := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", pgUser, c.port, devDatabase)
	if err := ensureDatabase(ctx, c.adminURL(), devDatabase); err != nil {
		return "", nil, errors.Join(err, c.stop())
	}
	return url, c.stop, nil
}

// pgCluster is a Postgres data directory under Dir/pg run through pg_ctl.
type pgCluster struct {
	binDir  string
	pgDir   string // Dir/pg, owned by the server's OS user
	dataDir string
	sockDir string
	logFile string
	port    int
	// cred is set when we are root and must run the binaries as pgUser.
	cred *syscall.Credential
}

func newCluster(dir, binDir string) (*pgCluster, error) {
	pgDir := filepath.Join(dir, "pg")
	c := &pgCluster{
		binDir:  binDir,
		pgDir:   pgDir,
		dataDir: filepath.Join(pgDir, "data"),
		sockDir: filepath.Join(pgDir, "run"),
		logFile: filepath.Join(pgDir, "postgres.log"),
	}
	if err := os.MkdirAll(c.sockDir, 0o755); err != nil {
		return nil, fmt.Errorf("create postgres dir: %w", err)
	}
	if os.Geteuid() == 0 {
		cred, err := postgresCredential()
		if err != nil {
			return nil, err
		}
		c.cred = cred
		// The server's user must be able to enter Dir to reach Dir/pg.
		if err := addOthersSearch(dir); err != nil {
			return nil, err
		}
		if err := c.chown(); err != nil {
			return nil, err
		}
		if err := c.run("test", "-w", pgDir, "-a", "-x", pgDir); err != nil {
			return nil, fmt.Errorf("postgres runs as OS user %q when devstack runs as root, and that user cannot "+
				"write %s (every parent folder must be searchable by others); use another Dir or set DATABASE_URL: %w",
				pgUser, pgDir, err)
		}
	}
	return c, nil
}

// start initializes the cluster on first use, stops a server left running
// by a killed dev command, and starts it on a free port.
func (c *pgCluster) start(ctx context.Context, port int) error {
	if err := c.initOnce(); err != nil {
		return err
	}
	// pg_ctl status exits 0 only when a server is running on this data dir.
	if c.pgCtl("status") == nil {
		if err := c.pgCtl("stop", "-m", "fast", "-w"); err != nil {
			return fmt.Errorf("stop postgres left running in %s: %w", c.dataDir, err)
		}
	}
	c.port = port
	if c.port == 0 {
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		c.port = ports[0]
	}
	if err := c.writeSettings(); err != nil {
		return err
	}
	if err := c.chown(); err != nil {
		return err
	}
	if err := c.pgCtl("start", "-w", "-t", "60", "-l", c.logFile); err != nil {
		return fmt.Errorf("start postgres on port %d: %w\n%s", c.port, err, tail(c.logFile, 20))
	}
	return nil
}

// initOnce runs initdb into a scratch folder and renames it into place, so
// an interrupted first run is simply redone.
func (c *pgCluster) initOnce() error {
	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); err == nil {
		return nil
	}
	scratch := c.dataDir + ".init"
	if err := os.RemoveAll(scratch); err != nil {
		return fmt.Errorf("remove partial postgres init: %w", err)
	}
	err := c.run(filepath.Join(c.binDir, "initdb"),
		"-D", scratch, "-U", pgUser, "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	if err != nil {
		return fmt.Errorf("initdb in %s: %w", scratch, err)
	}
	// Per-start settings (the port changes) live in an included file so the
	// generated postgresql.conf is edited only once.
	conf, err := os.OpenFile(filepath.Join(scratch, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open postgresql.conf: %w", err)
	}
	_, err = conf.WriteString("\ninclude_if_exists = 'devstack.conf'\n")
	if closeErr := conf.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("append to postgresql.conf: %w", err)
	}
	if err := os.RemoveAll(c.dataDir); err != nil {
		return fmt.Errorf("remove incomplete postgres data dir: %w", err)
	}
	if err := os.Rename(scratch, c.dataDir); err != nil {
		return fmt.Errorf("move postgres data dir into place: %w", err)
	}
	return nil
}

// writeSettings writes this start's listen settings to devstack.conf.
func (c *pgCluster) writeSettings() error {
	sock := c.sockDir
	// A socket path beyond sun_path stops postgres from starting; TCP alone
	// is all we use, so drop the socket rather than fail on a deep Dir.
	if len(sock)+len("/.s.PGSQL.65535") > maxSocketPath {
		sock = ""
	}
	settings := fmt.Sprintf("listen_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = %s\n"+
		"# A dev database may lose its last commits on a crash, never its consistency.\nsynchronous_commit = off\n",
		c.port, quoteConf(sock))
	if err := os.WriteFile(filepath.Join(c.dataDir, "devstack.conf"), []byte(settings), 0o644); err != nil {
		return fmt.Errorf("write postgres settings: %w", err)
	}
	return nil
}

func (c *pgCluster) stop() error {
	if err := c.pgCtl("stop", "-m", "fast", "-w"); err != nil {
		return fmt.Errorf("stop postgres: %w", err)
	}
	return nil
}

func (c *pgCluster) adminURL() string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", pgUser, c.port)
}

func (c *pgCluster) pgCtl(args ...string) error {
	return c.run(filepath.Join(c.binDir, "pg_ctl"), append([]string{"-D", c.dataDir}, args...)...)
}

// run executes a command as the server's user, from inside Dir/pg (the
// binaries fail when they cannot read the working directory), and in its
// own process group so a Ctrl-C meant for the dev command leaves Close to
// stop postgres in order.
func (c *pgCluster) run(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = c.pgDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// chown hands Dir/pg to the server's user when we are root.
func (c *pgCluster) chown() error {
	if c.cred == nil {
		return nil
	}
	uid, gid := int(c.cred.Uid), int(c.cred.Gid)
	err := filepath.WalkDir(c.pgDir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("chown %s to %s: %w", c.pgDir, pgUser, err)
	}
	return nil
}

// postgresCredential looks up the OS user the server runs as under root.
func postgresCredential() (*syscall.Credential, error) {
	u, err := user.Lookup(pgUser)
	if err != nil {
		return nil, fmt.Errorf("running as root, postgres needs the %q OS user: %w; create it or set DATABASE_URL", pgUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("uid %q of %s: %w", u.Uid, pgUser, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("gid %q of %s: %w", u.Gid, pgUser, err)
	}
	// Groups: an empty list drops root's supplementary groups.
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// addOthersSearch lets other users enter dir without listing or writing it.
func addOthersSearch(dir string) error {
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	if info.Mode().Perm()&0o001 != 0 {
		return nil
	}
	if err := os.Chmod(dir, info.Mode().Perm()|0o001); err != nil {
		return fmt.Errorf("make %s searchable for %s: %w", dir, pgUser, err)
	}
	return nil
}

var versionNumber = regexp.MustCompile(`\d+`)

// findPostgresBin returns a folder holding both initdb and pg_ctl: the one
// on PATH first, else the newest of the usual install locations.
func findPostgresBin() (string, bool) {
	has := func(dir string) bool {
		for _, name := range []string{"initdb", "pg_ctl"} {
			if info, err := os.Stat(filepath.Join(dir, name)); err != nil || info.IsDir() {
				return false
			}
		}
		return true
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), true
	}
	var dirs []string
	for _, pattern := range []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/usr/local/opt/postgresql*/bin", "/opt/homebrew/opt/postgresql*/bin"} {
		matches, _ := filepath.Glob(pattern) // only ErrBadPattern, impossible here
		dirs = append(dirs, matches...)
	}
	version := func(dir string) int {
		n, _ := strconv.Atoi(versionNumber.FindString(dir)) // no number sorts last
		return n
	}
	sort.SliceStable(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if has(d) {
			return d, true
		}
	}
	return "", false
}

// useFallbackServer creates fallbackDatabase on the conventional local
// server and returns its URL.
func useFallbackServer(ctx context.Context) (string, error) {
	if err := ensureDatabase(ctx, fallbackURL, fallbackDatabase); err != nil {
		return "", err
	}
	return strings.Replace(fallbackURL, "/postgres?", "/"+fallbackDatabase+"?", 1), nil
}

// ensureDatabase creates database name through adminURL unless it exists.
func ensureDatabase(ctx context.Context, adminURL, name string) error {
	ctx, cancel := context.WithTimeout(ctx, pgConnectTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %q: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %q: %w", name, err)
	}
	return nil
}

func pingDB(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, pgConnectTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if err := conn.Ping(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// quoteConf quotes a postgresql.conf string value.
func quoteConf(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// tail returns the last n lines of a log file to explain a failed start.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return path + ":\n" + strings.Join(lines, "\n")
}
