// Package console serves the web console's static assets, embedded in the
// binary, under /ui/: index.html for every page path (the pages are routed
// in the browser), the scripts and the style sheet by name. Every answer
// carries a strict Content-Security-Policy (scripts and styles from the
// api's own origin only, no inline script, no framing) and no-store, so a
// new binary's assets are used at once.
package console

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// CSP is the console's Content-Security-Policy. Images and audio of tool
// results are shown from data: URLs built in the page.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Prefix is where the console is served.
const Prefix = "/ui/"

// Handler serves the console under Prefix.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has assets/
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		name := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(r.URL.Path, Prefix)), "/")
		if name == "" || path.Ext(name) == "" {
			name = "index.html" // a page of the console, routed in the browser
		}
		body, err := fs.ReadFile(sub, name)
		if err != nil {
			http.Error(w, "not found: the console has no file "+name, http.StatusNotFound)
			return
		}
		if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
			h.Set("Content-Type", ct)
		}
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(body)
	})
}
