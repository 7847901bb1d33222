package config

import (
	"cmp"
	"encoding"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// referencePath is the configuration reference this package's keys are
// checked against; examplePath the example config.yaml, which shows every
// key (optional ones commented out).
const (
	referencePath = "../../docs/configuration.md"
	examplePath   = "../../examples/config.example.yaml"
)

// The reference's sections whose tables list the keys: config.yaml keys
// from the root, extensions_config.json keys relative to one mcpServers entry.
const (
	settingsSection = "## config.yaml"
	serverSection   = "## extensions_config.json"
)

// serverBlocks are the typed nested objects of an mcpServers entry (the
// entry itself is parsed by hand from knownServerKeys).
var serverBlocks = map[string]reflect.Type{
	"oauth":                reflect.TypeOf(OAuth{}),
	"routing":              reflect.TypeOf(Routing{}),
	"tools":                reflect.TypeOf(map[string]ToolOverride{}),
	"task_toolsets":        reflect.TypeOf([]TaskToolset{}),
	"headers_from_context": reflect.TypeOf(HeadersFromContext{}),
	"user_auth":            reflect.TypeOf(UserAuth{}),
}

// TestConfigurationReferenceListsEveryKey fails when a key of config.yaml
// or of an mcpServers entry exists in the code but has no row in
// docs/configuration.md, or has a row but no longer exists.
func TestConfigurationReferenceListsEveryKey(t *testing.T) {
	doc, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("the configuration reference: %v", err)
	}
	var settingsKeys []string
	keyPaths(reflect.TypeOf(Settings{}), "", "yaml", &settingsKeys)
	var serverKeys []string
	for k := range knownServerKeys {
		if ft, ok := serverBlocks[k]; ok {
			keyPaths(ft, k, "json", &serverKeys)
			continue
		}
		serverKeys = append(serverKeys, k)
	}
	serverKeys = append(serverKeys, "transport") // the alias of type
	for _, c := range []struct {
		section string
		code    []string
	}{{settingsSection, settingsKeys}, {serverSection, serverKeys}} {
		documented := tableKeys(sectionOf(string(doc), c.section))
		if len(documented) == 0 {
			t.Fatalf("%s: no section %q with a key table", referencePath, c.section)
		}
		compareKeys(t, c.section, c.code, documented)
	}
}

// TestExampleConfigShowsEveryKey fails when examples/config.example.yaml
// neither sets nor shows in a comment a key of config.yaml (the elements
// of lists and maps excepted: the example shows one or none).
func TestExampleConfigShowsEveryKey(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatalf("%s: %v", examplePath, err)
	}
	shown := map[string]bool{}
	yamlKeyPaths(&root, "", shown)
	var keys []string
	keyPaths(reflect.TypeOf(Settings{}), "", "yaml", &keys)
	slices.Sort(keys)
	for _, k := range keys {
		if !strings.Contains(k, "[]") && !strings.Contains(k, "<name>") && !shown[k] {
			t.Errorf("%s does not show `%s` (set it, or show it in a comment where it is optional)", examplePath, k)
		}
	}
}

// yamlKeyPaths records the key paths of a YAML document, including those
// of YAML written in the comments around each key ("# key: value").
func yamlKeyPaths(n *yaml.Node, path string, out map[string]bool) {
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			yamlKeyPaths(c, path, out)
		}
		return
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := joinKey(path, k.Value)
		out[key] = true
		for _, c := range []string{k.HeadComment, k.LineComment, k.FootComment, v.HeadComment, v.FootComment} {
			var commented yaml.Node
			if yaml.Unmarshal([]byte(uncomment(c)), &commented) == nil {
				yamlKeyPaths(&commented, path, out)
			}
		}
		yamlKeyPaths(v, key, out)
	}
}

// uncomment removes the comment marker (and one space) from each line.
func uncomment(comment string) string {
	lines := strings.Split(comment, "\n")
	for i, l := range lines {
		l = strings.TrimPrefix(strings.TrimLeft(l, " \t"), "#")
		lines[i] = strings.TrimPrefix(l, " ")
	}
	return strings.Join(lines, "\n")
}

// compareKeys reports keys on one side only.
func compareKeys(t *testing.T, section string, code, documented []string) {
	t.Helper()
	slices.Sort(code)
	for _, k := range code {
		if !slices.Contains(documented, k) {
			t.Errorf("%s %s: key `%s` exists in pkg/config but has no row", referencePath, section, k)
		}
	}
	for _, k := range documented {
		if !slices.Contains(code, k) {
			t.Errorf("%s %s: row `%s` names no key pkg/config reads", referencePath, section, k)
		}
	}
}

// textUnmarshaler is the interface of values written as one scalar
// (yamlUnmarshaler is settings_load.go's).
var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// keyPaths lists the dotted key paths under t: every leaf, and every list or
// map of objects (its elements' keys follow as "path[].key" and
// "path.<name>.key"). A type with its own unmarshaler is a leaf.
func keyPaths(t reflect.Type, path, tag string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(yamlUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		*out = append(*out, path)
		return
	}
	switch {
	case t.Kind() == reflect.Struct:
		for name, ft := range tagFields(t, tag) {
			keyPaths(ft, joinKey(path, name), tag, out)
		}
	case t.Kind() == reflect.Slice && isObject(t.Elem()):
		*out = append(*out, path)
		keyPaths(t.Elem(), path+"[]", tag, out)
	case t.Kind() == reflect.Map && isObject(t.Elem()):
		*out = append(*out, path)
		keyPaths(t.Elem(), path+".<name>", tag, out)
	default:
		*out = append(*out, path)
	}
}

// tagFields maps a struct's keys to field types: yaml keys as yaml.v3
// reads them (yamlFields), json keys by their tags.
func tagFields(t reflect.Type, tag string) map[string]reflect.Type {
	if tag == "yaml" {
		return yamlFields(t)
	}
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && name != "-" {
			out[cmp.Or(name, f.Name)] = f.Type
		}
	}
	return out
}

func isObject(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct
}

// sectionOf is the text from the heading line to the next heading of the
// same or a higher level.
func sectionOf(doc, heading string) string {
	start := strings.Index(doc, "\n"+heading+"\n")
	if start < 0 {
		return ""
	}
	rest := doc[start+len(heading)+2:]
	if end := strings.Index(rest, "\n## "); end >= 0 {
		rest = rest[:end]
	}
	return rest
}

// tableKeys are the first cells of the section's table rows that hold one
// backticked key path ("| `nats.url` | …").
func tableKeys(section string) []string {
	var keys []string
	for line := range strings.SplitSeq(section, "\n") {
		cell, ok := strings.CutPrefix(strings.TrimSpace(line), "|")
		if !ok {
			continue
		}
		cell, _, _ = strings.Cut(cell, "|")
		cell = strings.TrimSpace(cell)
		if len(cell) > 2 && cell[0] == '`' && cell[len(cell)-1] == '`' && !strings.Contains(cell[1:len(cell)-1], "`") {
			keys = append(keys, cell[1:len(cell)-1])
		}
	}
	return keys
}
