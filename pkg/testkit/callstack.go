package testkit

import (
	"bytes"
	"runtime/pprof"
	"slices"
	"strings"
)

// Frame is one frame of a goroutine's stack: the function (without the
// module path) and the file it is in (from pkg/ or services/ on).
type Frame struct{ Func, File string }

// CallStack is the stack, outermost call first, of a goroutine whose
// frames include every one of marks, read from a dump of all goroutines;
// nil when none does. Only this repository's frames are kept (its tests'
// left out). The code-path facts of docs/architecture.md are read with it
// off the goroutine serving a call.
func CallStack(marks ...string) []Frame {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
	for _, g := range strings.Split(buf.String(), "\n\n") {
		if slices.ContainsFunc(marks, func(m string) bool { return !strings.Contains(g, m) }) {
			continue
		}
		var frames []Frame
		lines := strings.Split(g, "\n")
		for i := 1; i+1 < len(lines); i += 2 {
			fn, loc := lines[i], strings.TrimSpace(lines[i+1])
			if !strings.HasPrefix(fn, "github.com/mcpbus/mcpbus/") || strings.Contains(fn, "_test.") {
				continue
			}
			fn = strings.TrimPrefix(fn[:strings.LastIndex(fn, "(")], "github.com/mcpbus/mcpbus/")
			file := loc[:strings.LastIndex(loc, ":")]
			for _, root := range []string{"/pkg/", "/services/"} {
				if j := strings.LastIndex(file, root); j >= 0 {
					file = file[j+1:]
					break
				}
			}
			frames = append(frames, Frame{Func: fn, File: file})
		}
		slices.Reverse(frames)
		return frames
	}
	return nil
}
