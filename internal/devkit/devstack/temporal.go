package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

const (
	localhost   = "127.0.0.1"
	clusterName = "active"
	// temporalDBFile is the SQLite file under Dir that holds all Temporal state.
	temporalDBFile = "temporal.db"
	// readyTimeout bounds the wait for the frontend to serve the namespace.
	readyTimeout = 30 * time.Second
)

// startTemporal runs all four Temporal services in this process on top of
// Dir/temporal.db, creating the schema and the namespace on first use, and
// returns once the frontend answers for Namespace.
func startTemporal(ctx context.Context, dir string, frontendPort int, logw io.Writer) (string, func() error, error) {
	ports, err := freePorts(5)
	if err != nil {
		return "", nil, err
	}
	if frontendPort == 0 {
		frontendPort = ports[0]
	} else if err := checkPortFree(frontendPort); err != nil {
		// The server treats a failed listen as fatal and exits the process;
		// an error is kinder to the dev command.
		return "", nil, fmt.Errorf("temporal frontend port: %w", err)
	}
	frontendAddr := hostPort(frontendPort)
	httpPort := ports[4]
	servicePorts := map[primitives.ServiceName]int{
		primitives.FrontendService: frontendPort,
		primitives.HistoryService:  ports[1],
		primitives.MatchingService: ports[2],
		primitives.WorkerService:   ports[3],
	}

	sqlCfg, err := prepareTemporalDB(filepath.Join(dir, temporalDBFile))
	if err != nil {
		return "", nil, err
	}

	cfg := &config.Config{}
	cfg.Global.Membership.MaxJoinDuration = 30 * time.Second
	cfg.Global.Membership.BroadcastAddress = localhost
	cfg.Persistence = config.Persistence{
		DefaultStore:     sqliteplugin.PluginName,
		VisibilityStore:  sqliteplugin.PluginName,
		NumHistoryShards: 1,
		DataStores:       map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sqlCfg}},
	}
	cfg.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: frontendAddr},
		},
	}
	cfg.DCRedirectionPolicy.Policy = "noop"
	cfg.Services = map[string]config.Service{}
	// Static hosts replace ringpop membership: one process needs no gossip,
	// and it saves the membership ports and the join wait.
	hosts := map[primitives.ServiceName]static.Hosts{}
	for name, port := range servicePorts {
		cfg.Services[string(name)] = config.Service{RPC: config.RPC{GRPCPort: port, BindOnIP: localhost}}
		hosts[name] = static.SingleLocalHost(hostPort(port))
	}
	// The frontend's HTTP API is what Nexus callbacks and curl use; without
	// it the server warns on every start.
	frontend := cfg.Services[string(primitives.FrontendService)]
	frontend.RPC.HTTPPort = httpPort
	cfg.Services[string(primitives.FrontendService)] = frontend
	cfg.Archival.History.State = "disabled"
	cfg.Archival.Visibility.State = "disabled"
	cfg.NamespaceDefaults.Archival.History.State = "disabled"
	cfg.NamespaceDefaults.Archival.Visibility.State = "disabled"
	// The worker service talks to the frontend through a public client.
	cfg.PublicClient.HostPort = frontendAddr

	logger, logLevel := serverLogger(logw)
	srv, err := temporal.NewServer(
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorization.NewNoopAuthorizer()),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper {
			return authorization.NewNoopClaimMapper()
		}),
		temporal.WithDynamicConfigClient(devDynamicConfig()),
	)
	if err != nil {
		return "", nil, fmt.Errorf("create temporal server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return "", nil, fmt.Errorf("start temporal server on %s: %w", frontendAddr, err)
	}
	stop := func() error {
		// While the services stop one by one, the internal workers fail
		// their polls against the already stopped ones; that is expected.
		logLevel.SetLevel(zapcore.ErrorLevel)
		if err := srv.Stop(); err != nil {
			return fmt.Errorf("stop temporal server: %w", err)
		}
		return nil
	}
	if err := waitTemporalReady(ctx, frontendAddr); err != nil {
		return "", nil, errors.Join(err, stop())
	}
	return frontendAddr, stop, nil
}

// prepareTemporalDB returns the SQLite persistence config for path. A new
// file gets its schema in a temporary file that is renamed into place only
// when complete, so an interrupted first start never leaves a half-built
// database behind. The namespace is (re)registered every time; that is a
// no-op when it exists.
func prepareTemporalDB(path string) (*config.SQL, error) {
	sqlCfg := &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: path,
		// Keys that are not SQLite URI parameters become PRAGMAs. WAL keeps
		// readers off the writer's lock; synchronous=normal is the usual WAL
		// pairing and still survives a crash of the dev command.
		ConnectAttributes: map[string]string{
			"mode":         "rwc",
			"journal_mode": "wal",
			"synchronous":  "normal",
			"busy_timeout": "10000",
		},
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		tmp := path + ".init"
		_ = os.Remove(tmp)
		tmpCfg := *sqlCfg
		tmpCfg.DatabaseName = tmp
		tmpCfg.ConnectAttributes = map[string]string{"mode": "rwc"}
		if err := sqliteschema.SetupSchema(&tmpCfg); err != nil {
			return nil, fmt.Errorf("create temporal schema in %s: %w", tmp, err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return nil, fmt.Errorf("move temporal database into place: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("check temporal database %s: %w", path, err)
	}

	ns, err := sqliteschema.NewNamespaceConfig(clusterName, Namespace, false, nil)
	if err != nil {
		return nil, fmt.Errorf("build namespace %q config: %w", Namespace, err)
	}
	if err := sqliteschema.CreateNamespaces(sqlCfg, ns); err != nil {
		return nil, fmt.Errorf("register namespace %q in %s: %w", Namespace, path, err)
	}
	return sqlCfg, nil
}

// devDynamicConfig tunes the server for one developer rather than a fleet.
func devDynamicConfig() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		// One partition per task queue: with the default four, a task can
		// land on a partition no poller is on and wait to be forwarded.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
		// Idle polls return sooner, so a stopping worker or server is not
		// held up by a minute-long poll.
		dynamicconfig.MatchingLongPollExpirationInterval.Key(): 10 * time.Second,
		// New search attributes are usable at once instead of after a
		// cache refresh.
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
		// Listing workflows in a UI or test loop would hit the default 10 RPS.
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		// The default host cache is sized for production memory.
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key(): 8192,
		// A deleted closed execution (an erased session's runs) waits for
		// the transfer queue's ack level: seconds, not the default 30 s.
		dynamicconfig.TransferProcessorUpdateAckInterval.Key(): 2 * time.Second,
	}
}

// serverLogger writes the server's warnings and errors to w (info level is
// far too chatty for a dev console) and returns the level to tune it later.
func serverLogger(w io.Writer) (log.Logger, zap.AtomicLevel) {
	level := zap.NewAtomicLevelAt(zapcore.WarnLevel)
	if w == io.Discard {
		return log.NewNoopLogger(), level
	}
	enc := zap.NewDevelopmentEncoderConfig()
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(w), level)
	return log.NewZapLogger(zap.New(core)), level
}

// waitTemporalReady polls the frontend until it describes Namespace, so
// callers can start workers right after Start returns.
func waitTemporalReady(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	quiet := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	var lastErr error
	for {
		c, err := client.DialContext(ctx, client.Options{HostPort: addr, Namespace: Namespace, Logger: quiet})
		if err == nil {
			_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: Namespace})
			c.Close()
			if err == nil {
				return nil
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("temporal frontend %s not ready: %w (last error: %v)", addr, ctx.Err(), lastErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkPortFree reports whether port can be bound on 127.0.0.1 right now.
func checkPortFree(port int) error {
	l, err := net.Listen("tcp", hostPort(port))
	if err != nil {
		return fmt.Errorf("port %d is not free: %w", port, err)
	}
	return l.Close()
}

func hostPort(port int) string {
	return localhost + ":" + strconv.Itoa(port)
}
