package chaos

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Row is one line of the fault table: what the requests of one fault's
// window (a second before the injection until a few seconds after the
// deployment served again) did.
type Row struct {
	Fault string
	// Calls is every request of the window; OK the answered ones,
	// FailedClean those that ended with an error code before HungAfter,
	// Hung those without an answer by then (must be 0).
	Calls, OK, FailedClean, Hung int
	// NoReplyKilled counts requests without an answer that were in flight
	// when the fault SIGKILLed a process: NATS request-reply cannot answer
	// a request its responder took down with it, so the requester's own
	// deadline ends it. Reported, not asserted (see Hung).
	NoReplyKilled int
	// Slowest is the longest any request of the window took.
	Slowest time.Duration
	// Tasks submitted in the window, completed afterwards, and lost
	// (submitted but not completed: must be 0).
	Submitted, Completed, Lost int
	// AuditLost counts answered calls without an audit record (measured
	// by the partition fault; must be 0).
	AuditLost int
	// DupPolls counts status calls at the upstream that no single lease
	// holder makes (overlapping or too close; must be 0).
	DupPolls int
	// Recovery is from the injection until the deployment served again and
	// no later request of the window failed.
	Recovery time.Duration
	// ProcsLeft are processes of our binaries not under this test (left
	// behind by a killed parent); FDsLeft the growth of this process's open
	// files over the window (both must be 0).
	ProcsLeft, FDsLeft int
	// Err is why the row failed beyond its counts (e.g. never recovered).
	Err string
	// Codes counts the error codes seen.
	Codes map[string]int
	// HungCalls describes each hung request (request id, what it called,
	// when it started relative to the injection), for the logs.
	HungCalls []string
}

// Failed reports the must-be-zero columns that are not.
func (r Row) Failed() []string {
	var out []string
	if r.Hung != 0 {
		out = append(out, fmt.Sprintf("%d hung calls", r.Hung))
	}
	if r.Lost != 0 {
		out = append(out, fmt.Sprintf("%d lost tasks", r.Lost))
	}
	if r.AuditLost != 0 {
		out = append(out, fmt.Sprintf("%d audit records lost", r.AuditLost))
	}
	if r.DupPolls != 0 {
		out = append(out, fmt.Sprintf("%d duplicate polls", r.DupPolls))
	}
	if r.ProcsLeft != 0 {
		out = append(out, fmt.Sprintf("%d processes left behind", r.ProcsLeft))
	}
	if r.FDsLeft > 0 {
		out = append(out, fmt.Sprintf("%d file descriptors left behind", r.FDsLeft))
	}
	for code, n := range r.Codes {
		if kind, c, _ := strings.Cut(code, ":"); kind != "fault" && (c == "invalid_request" || c == "not_found" || c == "internal") {
			// A valid request refused as the caller's fault, or a crash.
			out = append(out, fmt.Sprintf("%d valid %s requests answered %s", n, kind, c))
		}
	}
	if r.Err != "" {
		out = append(out, r.Err)
	}
	return out
}

// WriteTable prints rows as the suite's table.
func WriteTable(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fault\tcalls\tok\tfailed cleanly\thung\tno reply (killed)\tslowest\ttasks sub/done/lost\taudit lost\tdup polls\trecovery\tprocs left\tfds left\terror codes\t")
	for _, r := range rows {
		rec := r.Recovery.Round(100 * time.Millisecond).String()
		if r.Err != "" {
			rec = "NOT RECOVERED"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d/%d/%d\t%d\t%d\t%s\t%d\t%d\t%s\t\n", r.Fault, r.Calls, r.OK, r.FailedClean, r.Hung, r.NoReplyKilled,
			r.Slowest.Round(100*time.Millisecond), r.Submitted, r.Completed, r.Lost, r.AuditLost, r.DupPolls, rec, r.ProcsLeft, r.FDsLeft, codes(r.Codes))
	}
	_ = tw.Flush()
}

// codes lists the error codes by request kind ("http:unavailable=3").
func codes(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// Fault is one injected fault. Inject makes it happen and undoes it the way
// an operator or supervisor would (restarts what it killed); the suite then
// waits for the deployment to serve again.
type Fault struct {
	Name   string
	Inject func(s *Suite) error
}

// Suite runs faults one at a time on one deployment under load.
type Suite struct {
	D    *Deployment
	Load *Load
	// PG is the private PostgreSQL when the suite runs one (nil on the
	// shared server: no PostgreSQL restart then).
	PG *Postgres
	// Settle is how long the window goes on after the deployment serves
	// again; Baseline how long it starts before the injection.
	Settle, Baseline time.Duration
	// ReadyTimeout bounds the wait for recovery; TaskTimeout the wait for
	// the window's tasks to end.
	ReadyTimeout, TaskTimeout time.Duration

	mu        sync.Mutex
	pollsBase PollStats // counts of demohttp processes since restarted
	kills     []kill    // when a fault SIGKILLed a process
}

// kill is the time a SIGKILL took: from just before the signal until
// the process was reaped.
type kill struct{ from, to time.Time }

// killed notes that a fault SIGKILLs a process now; the returned func marks
// the process reaped.
func (s *Suite) killed() (reaped func()) {
	s.mu.Lock()
	s.kills = append(s.kills, kill{from: time.Now()})
	i := len(s.kills) - 1
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.kills[i].to = time.Now()
		s.mu.Unlock()
	}
}

// killedDuring reports whether a process was being SIGKILLed while o was
// in flight: a request sent to the process until it was reaped can be
// taken down with it.
func (s *Suite) killedDuring(o Outcome) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.kills {
		to := k.to
		if to.IsZero() {
			to = k.from
		}
		if !o.Start.After(to) && !o.Start.Add(o.Dur).Before(k.from) {
			return true
		}
	}
	return false
}

// Polls is the demohttp status-call counts over all its restarts.
func (s *Suite) Polls() (PollStats, error) {
	cur, err := s.D.PollStats()
	s.mu.Lock()
	defer s.mu.Unlock()
	cur.Calls += s.pollsBase.Calls
	cur.Overlaps += s.pollsBase.Overlaps
	cur.TooClose += s.pollsBase.TooClose
	cur.Examples = append(cur.Examples, s.pollsBase.Examples...)
	return cur, err
}

// RestartDemoHTTP SIGKILLs the HTTP upstream with the tasks (keeping its
// counts) and starts it again on the same port and state dir after down.
func (s *Suite) RestartDemoHTTP(down time.Duration) error {
	if st, err := s.D.PollStats(); err == nil {
		s.mu.Lock()
		s.pollsBase.Calls += st.Calls
		s.pollsBase.Overlaps += st.Overlaps
		s.pollsBase.TooClose += st.TooClose
		s.pollsBase.Examples = append(s.pollsBase.Examples, st.Examples...)
		s.mu.Unlock()
	}
	reaped := s.killed()
	s.D.DemoHTTP.Kill()
	reaped()
	time.Sleep(down)
	return s.D.StartUpstream(s.D.DemoHTTP)
}

// Run injects f and measures its window.
func (s *Suite) Run(f Fault) Row {
	polls, _ := s.Polls()
	return s.run(f, time.Now(), true, polls, selfFDs())
}

// Mark is the start of a window measured by RunSince.
type Mark struct {
	at    time.Time
	polls PollStats
	fds   int
}

// Mark notes the start of a window.
func (s *Suite) Mark() Mark {
	polls, _ := s.Polls()
	return Mark{at: time.Now(), polls: polls, fds: selfFDs()}
}

// RunSince measures a window that began at m, with f injected now and no
// baseline: the soak's row.
func (s *Suite) RunSince(f Fault, m Mark) Row {
	return s.run(f, m.at, false, m.polls, m.fds)
}

func (s *Suite) run(f Fault, from time.Time, baseline bool, pollsBefore PollStats, fdsBefore int) Row {
	row := Row{Fault: f.Name, Codes: map[string]int{}}
	if baseline {
		time.Sleep(s.Baseline) // the window's steady part before the fault
	}
	t0 := time.Now()
	var errs []string
	if err := f.Inject(s); err != nil {
		errs = append(errs, "inject: "+err.Error())
	}
	readyErr := s.D.WaitReady(s.ReadyTimeout)
	readyAt := time.Now()
	if readyErr != nil {
		errs = append(errs, readyErr.Error())
	}
	time.Sleep(s.Settle)
	to := time.Now()
	outcomes, ids := s.Load.Window(from, to)
	row.Calls = len(outcomes)
	for _, o := range outcomes {
		row.Slowest = max(row.Slowest, o.Dur)
		switch {
		case o.Code == "":
			row.OK++
		case o.Hung() && s.killedDuring(o):
			row.NoReplyKilled++
			row.Codes[o.Kind+":no-reply"]++
		case o.Hung():
			row.Hung++
			row.Codes[o.Kind+":hung"]++
			row.HungCalls = append(row.HungCalls, fmt.Sprintf("%s %s started %s after the injection",
				o.ID, o.Detail, o.Start.Sub(t0).Round(time.Millisecond)))
		default:
			row.FailedClean++
			row.Codes[o.Kind+":"+o.Code]++
		}
	}
	end := readyAt
	if last := LastFailureEnd(outcomes); last.After(end) {
		end = last
	}
	row.Recovery = end.Sub(t0)

	row.Submitted = len(ids)
	if len(ids) > 0 {
		done, statuses, err := WaitTasks(s.D.DBURL, ids, s.TaskTimeout)
		if err != nil {
			errs = append(errs, "task statuses: "+err.Error())
		}
		row.Completed = done
		row.Lost = len(ids) - done
		if row.Lost > 0 {
			count := map[string]int{}
			for _, id := range ids {
				count[statuses[id]]++
			}
			errs = append(errs, fmt.Sprintf("tasks by status %v", count))
		}
	}
	if after, err := s.Polls(); err == nil {
		row.DupPolls = (after.Overlaps + after.TooClose) - (pollsBefore.Overlaps + pollsBefore.TooClose)
		if row.DupPolls > 0 {
			errs = append(errs, fmt.Sprintf("duplicate polls of %v", after.Examples))
		}
	} else {
		errs = append(errs, "poll stats: "+err.Error())
	}
	stray := strays(s.D.Bins.All())
	row.ProcsLeft = len(stray)
	if len(stray) > 0 {
		errs = append(errs, "left behind: "+strings.Join(stray, ", "))
	}
	row.FDsLeft = selfFDs() - fdsBefore
	row.Err = strings.Join(errs, "; ")
	return row
}

// KillAndRestart is the SIGKILL fault of one service process: killed, then
// started again at once, as a supervisor does.
func KillAndRestart(proc string) Fault {
	return Fault{Name: "SIGKILL " + proc, Inject: func(s *Suite) error {
		p := s.D.Procs[proc]
		reaped := s.killed()
		p.Kill()
		reaped()
		return p.Start()
	}}
}

// NATSRestart stops the NATS server, leaves it down for down and starts it
// on the same port and store.
func NATSRestart(down time.Duration) Fault {
	return Fault{Name: fmt.Sprintf("NATS restart (%s down)", down), Inject: func(s *Suite) error {
		s.D.NATS.Stop()
		time.Sleep(down)
		return s.D.NATS.Start()
	}}
}

// PostgresRestart stops the private PostgreSQL, leaves it down for down and
// starts it again.
func PostgresRestart(down time.Duration) Fault {
	return Fault{Name: fmt.Sprintf("PostgreSQL restart (%s down)", down), Inject: func(s *Suite) error {
		if s.PG == nil {
			return fmt.Errorf("no private PostgreSQL")
		}
		if err := s.PG.Stop(); err != nil {
			return err
		}
		time.Sleep(down)
		return s.PG.Start()
	}}
}

// UpstreamFault calls a fault tool of the faulty servers (faulty over
// stdio, faultyhttp over HTTP) twice at once each, then a normal tool on the
// same threads: the fault calls must end within their timeout and the
// threads serve again.
func UpstreamFault(name, tool, args string, servers ...string) Fault {
	return Fault{Name: "upstream " + name, Inject: func(s *Suite) error {
		var wg sync.WaitGroup
		for i := range 2 {
			for _, srv := range servers {
				thread := fmt.Sprintf("fault-%s-%d", tool, i)
				wg.Add(1)
				go func() {
					defer wg.Done()
					s.Load.Do("fault", srv+"_"+tool, thread, args)
				}()
			}
		}
		wg.Wait()
		for i := range 2 {
			for _, srv := range servers {
				s.Load.Do("fault", srv+"_echo", fmt.Sprintf("fault-%s-%d", tool, i), `{"message":"after"}`)
			}
		}
		return nil
	}}
}

// UpstreamHTTPCrash SIGKILLs the HTTP upstream serving the report tasks
// (tasks in flight) and starts it again after down with its state.
func UpstreamHTTPCrash(down time.Duration) Fault {
	return Fault{Name: fmt.Sprintf("upstream demohttp SIGKILL (%s down)", down), Inject: func(s *Suite) error {
		return s.RestartDemoHTTP(down)
	}}
}

// FullRestart stops every service, edits the extensions config (a change
// of the task-enabled server demohttp) and starts the services in order.
// With apiOnly the file is kept only in the api's directory from then on
// (the other services, as on machines of their own, read the shared config
// from NATS alone).
func FullRestart(order []string, apiOnly bool) Fault {
	name := "full restart, edited config, order " + strings.Join(order, ",")
	if apiOnly {
		name = "full restart, edited file at api only, order " + strings.Join(order, ",")
	}
	return Fault{Name: name, Inject: func(s *Suite) error {
		s.D.ExtensionsAtAPIOnly = s.D.ExtensionsAtAPIOnly || apiOnly
		if slow := s.D.StopServices(); len(slow) > 0 {
			return fmt.Errorf("needed SIGKILL to stop: %v", slow)
		}
		if err := s.D.EditExtensions(); err != nil {
			return err
		}
		return s.D.StartServices(order)
	}}
}
