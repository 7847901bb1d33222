package chaos

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// NATSServerBin is the nats-server binary the suite runs.
var NATSServerBin = envOr("MCPBUS_CHAOS_NATS_SERVER", "/usr/sbin/nats-server")

// PartitionNATSServer is the nats-server binary of the partition's
// three-node cluster ($MCPBUS_CHAOS_PARTITION_NATS_SERVER; by default
// TestMain builds the version of the module the project requires). Not
// the machine's: a nats-server before 2.9.16 delays a route's pings while
// traffic flows on it, so under load a cluster never notices a cut-off
// node, keeps its subscriptions and sends it requests no one answers
// (nats-server issue 4014).
var PartitionNATSServer = os.Getenv("MCPBUS_CHAOS_PARTITION_NATS_SERVER")

// LogLevel is the services' log.level ($MCPBUS_CHAOS_LOG_LEVEL, default
// warn): their logs are printed when the suite fails.
var LogLevel = envOr("MCPBUS_CHAOS_LOG_LEVEL", "warn")

// PostgresBinDir holds initdb and pg_ctl for a private PostgreSQL.
var PostgresBinDir = envOr("MCPBUS_CHAOS_PG_BIN", "/usr/lib/postgresql/15/bin")

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// FreePort returns a loopback port for a child process (testkit.FreePort:
// below the ephemeral range, so no other process's connection takes it first).
func FreePort() (int, error) { return testkit.FreePort() }

// waitTCP waits until addr accepts connections or the deadline passes.
func waitTCP(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not accepting connections after %s: %w", addr, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// NATSServer is a nats-server process with JetStream on a fixed loopback
// port and store directory, so a restart comes back with the same streams
// and buckets at the same address.
type NATSServer struct {
	URL  string
	Port int
	proc *Proc
}

// StartNATS starts nats-server with JetStream on a free port, its store in dir.
func StartNATS(dir string) (*NATSServer, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	store := filepath.Join(dir, "jetstream")
	p := &Proc{Name: "nats-server", Bin: NATSServerBin, Dir: dir,
		Args: []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", store}}
	n := &NATSServer{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), Port: port, proc: p}
	return n, n.Start()
}

// Start starts the server (again) and waits for its port.
func (n *NATSServer) Start() error {
	if err := n.proc.Start(); err != nil {
		return err
	}
	return waitTCP(fmt.Sprintf("127.0.0.1:%d", n.Port), 20*time.Second)
}

// Stop stops the server with SIGTERM (a clean shutdown).
func (n *NATSServer) Stop() { n.proc.Stop(20 * time.Second) }

// Output is the server's log.
func (n *NATSServer) Output() string { return n.proc.Output() }

// Postgres is a private PostgreSQL cluster (initdb in a temp dir, its own
// port), so the suite can restart it without disturbing anyone else's.
type Postgres struct {
	URL  string
	Port int
	dir  string
	user string
	// listen is its listen_addresses (127.0.0.1 unless started with
	// StartPostgresOn).
	listen string
}

// runAs runs a PostgreSQL tool, as user when the test runs as root
// (initdb and postgres refuse root).
func runAs(user, bin string, args ...string) ([]byte, error) {
	if os.Geteuid() == 0 {
		args = append([]string{"-u", user, "--", bin}, args...)
		bin = "runuser"
	}
	return exec.Command(bin, args...).CombinedOutput()
}

// StartPostgres creates and starts a private cluster under dir.
func StartPostgres(dir string) (*Postgres, error) { return StartPostgresOn(dir, "", "") }

// StartPostgresOn is StartPostgres also listening on addr, trusting
// clients from the network subnet (a CIDR): the processes in the
// partition's network namespaces. Empty addr is loopback only.
func StartPostgresOn(dir, addr, subnet string) (*Postgres, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	pg := &Postgres{Port: port, dir: filepath.Join(dir, "pgdata"), user: "postgres", listen: "127.0.0.1"}
	if addr != "" {
		pg.listen += "," + addr
	}
	if err := os.MkdirAll(pg.dir, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		// The data directory (and the socket directory) belong to postgres.
		if out, err := exec.Command("chown", "-R", pg.user, dir).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("chown %s: %v: %s", dir, err, out)
		}
	}
	if out, err := runAs(pg.user, filepath.Join(PostgresBinDir, "initdb"), "-D", pg.dir, "-U", "postgres",
		"-A", "trust", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	if subnet != "" {
		hba, err := os.OpenFile(filepath.Join(pg.dir, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("pg_hba.conf: %w", err)
		}
		_, err = fmt.Fprintf(hba, "host all all %s trust\n", subnet)
		if cerr := hba.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("pg_hba.conf: %w", err)
		}
	}
	pg.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return pg, pg.Start()
}

// Start starts the cluster (again) and waits until it accepts queries.
func (pg *Postgres) Start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=%s -c fsync=off -c max_connections=200", pg.Port, pg.dir, pg.listen)
	if out, err := runAs(pg.user, filepath.Join(PostgresBinDir, "pg_ctl"), "-D", pg.dir, "-o", opts,
		"-l", filepath.Join(pg.dir, "log"), "-w", "-t", "60", "start"); err != nil {
		return fmt.Errorf("pg_ctl start: %v: %s", err, out)
	}
	return nil
}

// Stop stops the cluster (fast mode: sessions are disconnected, as in a
// restart by an operator).
func (pg *Postgres) Stop() error {
	if out, err := runAs(pg.user, filepath.Join(PostgresBinDir, "pg_ctl"), "-D", pg.dir, "-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop: %v: %s", err, out)
	}
	return nil
}

// FreshSchema creates a schema named for this run in the database at base
// and returns a URL whose search_path selects it, and a func dropping it.
func FreshSchema(base string) (string, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("PostgreSQL at %s: %w", redactURL(base), err)
	}
	defer conn.Close(context.Background())
	schema := fmt.Sprintf("mcpbus_chaos_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, err
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, base); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			_ = c.Close(ctx)
		}
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// redactURL drops credentials and query from a URL for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}
