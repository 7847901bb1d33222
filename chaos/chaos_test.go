package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// bins are built once for the package from the tree under test.
var bins Binaries

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpbus-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins = Binaries{MCPBus: filepath.Join(dir, "mcpbus"), Demo: filepath.Join(dir, "demo-server")}
	build := [][2]string{{bins.MCPBus, "github.com/mcpbus/mcpbus/cmd/mcpbus"}, {bins.Demo, "github.com/mcpbus/mcpbus/examples/demoserver"}}
	if PartitionNATSServer == "" {
		// The partition's cluster runs the nats-server the project
		// depends on (go.work), whatever the machine has (see
		// PartitionNATSServer).
		PartitionNATSServer = filepath.Join(dir, "nats-server")
		build = append(build, [2]string{PartitionNATSServer, "github.com/nats-io/nats-server/v2"})
	}
	for _, b := range build {
		if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b[1], err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// full selects the whole suite (make chaos); the default is the short
// subset that runs inside make test.
func full() bool { return os.Getenv("MCPBUS_CHAOS") == "full" }

// soakDuration is MCPBUS_CHAOS_SOAK, else 10 minutes in the full suite and
// 15 seconds in the short one.
func soakDuration(t *testing.T) time.Duration {
	if v := os.Getenv("MCPBUS_CHAOS_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("MCPBUS_CHAOS_SOAK=%q: %v", v, err)
		}
		return d
	}
	if full() {
		return 10 * time.Minute
	}
	return 15 * time.Second
}

// faults is the list the suite injects, one at a time.
func faults() []Fault {
	// The short suite (make test): a SIGKILL of a stateless service, of a
	// toolcall replica that owns stdio sessions (its hand-overs caught in
	// flight end unavailable once its heartbeats expire), of a task poller
	// holding leases, a NATS restart and a hanging upstream.
	short := []Fault{
		KillAndRestart("discovery"),
		KillAndRestart("toolcall-1"),
		KillAndRestart("taskpoller-1"),
		NATSRestart(5 * time.Second),
		UpstreamFault("hang", "hang", `{}`, "faulty", "faultyhttp"),
	}
	if !full() {
		return short
	}
	var all []Fault
	for _, p := range ServiceProcs {
		all = append(all, KillAndRestart(p))
	}
	all = append(all,
		NATSRestart(5*time.Second),
		PostgresRestart(5*time.Second),
		UpstreamFault("hang", "hang", `{}`, "faulty", "faultyhttp"),
		UpstreamFault("crash mid-call (stdio)", "crash", `{}`, "faulty"),
		UpstreamHTTPCrash(2*time.Second),
		UpstreamFault("malformed JSON-RPC", "malformed", `{}`, "faulty", "faultyhttp"),
		UpstreamFault("100 MB line", "huge", `{}`, "faulty", "faultyhttp"),
	)
	// A full restart with an edited task server, with each service
	// starting first and, in reverse, last.
	for i := range Services {
		order := append(append([]string(nil), Services[i:]...), Services[:i]...)
		rev := make([]string, len(order))
		for j, s := range order {
			rev[len(order)-1-j] = s
		}
		all = append(all, FullRestart(order, false), FullRestart(rev, false))
	}
	// The same with the file at the api only: the services that start
	// before the api see the previous file in NATS (issue 12, case 1).
	all = append(all, FullRestart([]string{"api", "tokens", "discovery", "toolcall", "taskpoller"}, true),
		FullRestart(Services, true))
	return all
}

// TestFaultSuite runs the deployment under load, soaks it, then injects
// each fault and asserts the must-be-zero columns of the table: no hung
// call, no lost task, no duplicate poll, no process or file descriptor left
// behind, and a deployment that serves again after every fault.
func TestFaultSuite(t *testing.T) {
	only, err := regexp.Compile(os.Getenv("MCPBUS_CHAOS_FAULTS"))
	if err != nil {
		t.Fatalf("MCPBUS_CHAOS_FAULTS: %v", err)
	}
	var rows []Row
	// The full suite begins with the network partition, on a deployment
	// of its own (three NATS nodes in network namespaces).
	if full() && only.MatchString("network partition") {
		t.Run("partition", func(t *testing.T) { rows = append(rows, runPartition(t)) })
	}
	if os.Getenv("MCPBUS_CHAOS_PARTITION_ONLY") != "" {
		var report strings.Builder
		fmt.Fprintf(&report, "mcpbus fault suite, network partition only, %d callers, call timeout %s, hung after %s\n\n", partitionCallers, CallTimeout, HungAfter)
		WriteTable(&report, rows)
		writeReport(t, report.String())
		return
	}
	root := t.TempDir()
	fdsAtStart := selfFDs()
	ns, err := StartNATS(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ns.Stop()
		if t.Failed() {
			t.Logf("--- nats-server ---\n%s", tail(ns.Output(), 4000))
		}
	})
	base := envOr("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	var pg *Postgres
	if full() {
		// A private cluster: the machine's PostgreSQL is shared, and the
		// suite restarts this one.
		pgRoot, err := os.MkdirTemp("", "mcpbus-chaos-pg-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(pgRoot) })
		if pg, err = StartPostgres(pgRoot); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pg.Stop() })
		base = pg.URL
	}
	dbURL, drop, err := FreshSchema(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)

	d, err := NewDeployment(bins, root, ns, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			d.Close()
		}
		if t.Failed() {
			for _, name := range append(ServiceProcs, "demohttp", "faultyhttp") {
				p := d.Procs[name]
				if p == nil {
					p = map[string]*Proc{"demohttp": d.DemoHTTP, "faultyhttp": d.FaultyHTTP}[name]
				}
				t.Logf("--- %s ---\n%s", name, tail(p.Output(), 6000))
			}
		}
	})
	if err := d.StartServices(Services); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitReady(120 * time.Second); err != nil {
		t.Fatal(err)
	}

	load := StartLoad(d, 32, 200*time.Millisecond, 500*time.Millisecond)
	s := &Suite{D: d, Load: load, PG: pg, Baseline: time.Second, Settle: 2 * time.Second,
		ReadyTimeout: 120 * time.Second, TaskTimeout: 90 * time.Second}

	soak := soakDuration(t)
	trends, soakRow := runSoak(t, s, soak)
	rows = append(rows, soakRow)
	for _, f := range faults() {
		if !only.MatchString(f.Name) {
			continue
		}
		row := s.Run(f)
		t.Logf("%s: %d calls, %d ok, %d failed cleanly, %d hung; tasks %d/%d/%d; %d dup polls; recovery %s %s",
			row.Fault, row.Calls, row.OK, row.FailedClean, row.Hung, row.Submitted, row.Completed, row.Lost, row.DupPolls,
			row.Recovery.Round(100*time.Millisecond), row.Err)
		for _, h := range row.HungCalls {
			t.Logf("  hung: %s", h)
		}
		rows = append(rows, row)
	}
	load.Stop()
	d.Close()
	closed = true

	var report strings.Builder
	fmt.Fprintf(&report, "mcpbus fault suite (%s), %d callers, call timeout %s, hung after %s\n\n", mode(), 32, CallTimeout, HungAfter)
	WriteTable(&report, rows)
	fmt.Fprintf(&report, "\nsoak: %s at steady load, sampled from /proc (threads, open files, child processes, RSS)\n\n", soak)
	WriteTrends(&report, trends)
	writeReport(t, report.String())

	for _, r := range rows {
		if bad := r.Failed(); len(bad) > 0 {
			t.Errorf("%s: %s", r.Fault, strings.Join(bad, "; "))
		}
	}
	for _, tr := range trends {
		if tr.Exceeds() {
			t.Errorf("soak: %s %s grew by %.1f (%.2f/min) from %.0f, beyond the bound", tr.Proc, tr.Measure, tr.Growth, tr.PerMinute, tr.First)
		}
	}
	// Nothing of ours left running, and this process holds no more files
	// than before the deployment (its connections closed).
	if left := running(bins.All()); len(left) > 0 {
		t.Errorf("processes of the deployment still running after it stopped: %v", left)
	}
	ns.Stop()
	if n := selfFDs(); n > fdsAtStart {
		t.Errorf("the harness holds %d open files, %d at the start", n, fdsAtStart)
	}
}

// runSoak keeps the steady load for soak after a warm-up, sampling every
// process, and returns the trends and a table row for the window.
func runSoak(t *testing.T, s *Suite, soak time.Duration) ([]Trend, Row) {
	t.Helper()
	warm := 10 * time.Second
	time.Sleep(warm) // stdio sessions and pools fill before the measured span
	every := soak / 30
	if every < time.Second {
		every = time.Second
	}
	mark := s.Mark()
	var samples []Sample
	for end := time.Now().Add(soak); time.Now().Before(end); time.Sleep(every) {
		samples = append(samples, SampleDeployment(s.D))
	}
	samples = append(samples, SampleDeployment(s.D))
	row := s.RunSince(Fault{Name: fmt.Sprintf("none (soak %s)", soak), Inject: func(*Suite) error { return nil }}, mark)
	return Trends(samples), row
}

func mode() string {
	if full() {
		return "full"
	}
	return "short"
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// writeReport logs the suite's report and writes it to
// $MCPBUS_CHAOS_REPORT when set.
func writeReport(t *testing.T, report string) {
	t.Log("\n" + report)
	if path := os.Getenv("MCPBUS_CHAOS_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			t.Error(err)
		}
	}
}
