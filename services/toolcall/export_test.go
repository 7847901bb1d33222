package toolcall

// StdioSubject is the subject of a replica's stdio hand-over entry, for
// the tests that speak to it directly.
var StdioSubject = stdioSubject
