package demo

import (
	"sync"
	"time"
)

// PollTracker counts get_report_status calls per task and notices the ones
// a single lease holder would never make: a call for a task while another
// call for the same task is still running (two pollers at once), or one that
// starts less than MinGap after the previous call for that task ended. A
// fault suite reads it (through the -poll-stats endpoint of the demo server
// command) to prove that a task is polled by one poller at a time.
type PollTracker struct {
	// MinGap is the shortest pause a lease holder leaves between two status
	// calls of one task (the poll interval, less slack); zero disables the
	// too-close check.
	MinGap time.Duration

	mu       sync.Mutex
	inflight map[string]int
	lastEnd  map[string]time.Time
	stats    PollStats
}

// PollStats is a snapshot of a [PollTracker].
type PollStats struct {
	// Calls is every status call; Tasks the distinct task ids polled.
	Calls int `json:"calls"`
	Tasks int `json:"tasks"`
	// Overlaps counts calls that began while another call for the same
	// task was in flight; TooClose calls that began within MinGap of the
	// previous call's end.
	Overlaps int `json:"overlaps"`
	TooClose int `json:"too_close"`
	// Examples names up to ten task ids of overlapping or too-close calls.
	Examples []string `json:"examples,omitempty"`
}

// Duplicates is the number of status calls no single lease holder makes.
func (s PollStats) Duplicates() int { return s.Overlaps + s.TooClose }

// begin records the start of a status call for id; the returned func
// records its end.
func (p *PollTracker) begin(id string) func() {
	if p == nil {
		return func() {}
	}
	now := time.Now()
	p.mu.Lock()
	if p.inflight == nil {
		p.inflight, p.lastEnd = map[string]int{}, map[string]time.Time{}
	}
	p.stats.Calls++
	last, seen := p.lastEnd[id]
	if !seen && p.inflight[id] == 0 {
		p.stats.Tasks++
	}
	dup := false
	switch {
	case p.inflight[id] > 0:
		p.stats.Overlaps++
		dup = true
	case seen && p.MinGap > 0 && now.Sub(last) < p.MinGap:
		p.stats.TooClose++
		dup = true
	}
	if dup && len(p.stats.Examples) < 10 {
		p.stats.Examples = append(p.stats.Examples, id)
	}
	p.inflight[id]++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.inflight[id]--
		p.lastEnd[id] = time.Now()
		p.mu.Unlock()
	}
}

// Stats returns a snapshot of the counts.
func (p *PollTracker) Stats() PollStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Examples = append([]string(nil), s.Examples...)
	return s
}
