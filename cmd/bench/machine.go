package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// describeMachine lists what the absolute figures depend on.
func describeMachine(st *stack) []string {
	var out []string
	cpu := cpuModel()
	out = append(out, fmt.Sprintf("CPU: %s, %d logical cores (GOMAXPROCS %d)", cpu, runtime.NumCPU(), runtime.GOMAXPROCS(0)))
	if mem := memTotal(); mem > 0 {
		out = append(out, fmt.Sprintf("memory: %.1f GiB", float64(mem)/(1<<30)))
	}
	if rel, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		out = append(out, fmt.Sprintf("OS: %s %s, kernel %s", runtime.GOOS, runtime.GOARCH, strings.TrimSpace(string(rel))))
	}
	out = append(out, "Go: "+runtime.Version())
	if st.temporal == nil {
		// Only measurements on Postgres alone ran (startDatabase).
		out = append(out, fmt.Sprintf("Postgres %s (no Temporal, no S3: not started)", st.pgServer))
	} else {
		out = append(out, fmt.Sprintf("Temporal server %s (temporaltest, SQLite in memory, 1 task queue partition), Go SDK %s",
			moduleVersion("go.temporal.io/server"), moduleVersion("go.temporal.io/sdk")))
		out = append(out, fmt.Sprintf("Postgres %s (schema %s, dropped at the end)", st.pgServer, st.schema))
		out = append(out, "S3: "+st.s3Name)
		out = append(out, fmt.Sprintf("worker settings: WORKER_ACTIVITIES=%d, LLM_PARALLELISM=%d (the deployment defaults unless set)",
			st.cfg.WorkerActivities, st.cfg.LLMParallelism))
	}
	out = append(out, fmt.Sprintf("load average (1 min) at the start %s, at the end %s: other processes on the machine share its cores",
		loadStart, loadAvg()))
	out = append(out, "date: "+time.Now().UTC().Format("2006-01-02 15:04 MST"))
	return out
}

// loadStart is the load average when the bench started.
var loadStart = loadAvg()

// loadAvg is the 1-minute load average of /proc/loadavg.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// memTotal is MemTotal of /proc/meminfo in bytes, 0 when unknown.
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "?"
	}
	for _, d := range info.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return "?"
}
