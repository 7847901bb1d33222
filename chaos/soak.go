package chaos

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"
)

// Sample is one reading of every deployment process.
type Sample struct {
	At    time.Time
	Procs map[string]ProcStat
}

// SampleDeployment reads /proc for every service process and HTTP
// upstream. Children counts the stdio servers a toolcall replica runs.
func SampleDeployment(d *Deployment) Sample {
	children := childCounts(scanProcs())
	s := Sample{At: time.Now(), Procs: map[string]ProcStat{}}
	procs := map[string]*Proc{"demohttp": d.DemoHTTP, "faultyhttp": d.FaultyHTTP}
	for name, p := range d.Procs {
		procs[name] = p
	}
	for name, p := range procs {
		if st, ok := readProcStat(p.Pid(), children); ok {
			s.Procs[name] = st
		}
	}
	return s
}

// Trend is the least-squares slope of one measure of one process over a
// soak, per minute, and its fitted growth over the measured span.
type Trend struct {
	Proc, Measure string
	First, Last   float64
	PerMinute     float64
	Growth        float64
}

// Measures of a ProcStat the soak follows.
var Measures = []string{"threads", "fds", "children", "rss_kb"}

func measure(s ProcStat, m string) float64 {
	switch m {
	case "threads":
		return float64(s.Threads)
	case "fds":
		return float64(s.FDs)
	case "children":
		return float64(s.Children)
	default:
		return float64(s.RSSKB)
	}
}

// Trends fits a line to each process's measures over samples.
func Trends(samples []Sample) []Trend {
	var out []Trend
	if len(samples) < 3 {
		return nil
	}
	names := map[string]bool{}
	for _, s := range samples {
		for n := range s.Procs {
			names[n] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	t0 := samples[0].At
	for _, n := range sorted {
		for _, m := range Measures {
			var xs, ys []float64
			for _, s := range samples {
				if st, ok := s.Procs[n]; ok {
					xs = append(xs, s.At.Sub(t0).Minutes())
					ys = append(ys, measure(st, m))
				}
			}
			if len(xs) < 3 {
				continue
			}
			slope := fitSlope(xs, ys)
			out = append(out, Trend{Proc: n, Measure: m, First: ys[0], Last: ys[len(ys)-1], PerMinute: slope,
				Growth: slope * (xs[len(xs)-1] - xs[0])})
		}
	}
	return out
}

// fitSlope is the least-squares slope of ys over xs.
func fitSlope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

// Bound is how much a measure may grow over a soak (fitted): Abs plus Rel
// times its first value.
type Bound struct{ Abs, Rel float64 }

// SoakBounds are the suite's bounds. File descriptors and children have
// small absolute slack (a stdio session opening while sampling); threads
// and RSS move with the Go runtime and the load.
var SoakBounds = map[string]Bound{
	"threads":  {Abs: 4, Rel: 0.25},
	"fds":      {Abs: 6, Rel: 0.10},
	"children": {Abs: 1, Rel: 0},
	"rss_kb":   {Abs: 16 << 10, Rel: 0.30},
}

// Exceeds reports whether a trend grew beyond its bound.
func (t Trend) Exceeds() bool {
	b := SoakBounds[t.Measure]
	return t.Growth > b.Abs+b.Rel*t.First
}

// WriteTrends prints the trends.
func WriteTrends(w io.Writer, trends []Trend) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "process\tmeasure\tfirst\tlast\tslope/min\tfitted growth\tbound\t")
	for _, t := range trends {
		b := SoakBounds[t.Measure]
		mark := ""
		if t.Exceeds() {
			mark = " EXCEEDED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%+.2f\t%+.1f\t%.0f%s\t\n", t.Proc, t.Measure, t.First, t.Last, t.PerMinute, t.Growth, b.Abs+b.Rel*t.First, mark)
	}
	_ = tw.Flush()
}
