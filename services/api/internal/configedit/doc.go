// Package configedit is the api's REST config editor over
// extensions_config.json as written: the masked view of the servers
// (mask.go), an edit merged with what is stored so that "***" keeps a
// stored secret (merge.go, restore.go), the value checks a save applies
// (savecheck.go) and the atomic, serialised file write (write.go). It reads
// and writes the file in key order through the one ordered codec,
// pkg/orderedjson; parsing and validation stay in pkg/config.
package configedit
