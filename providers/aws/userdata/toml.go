package userdata

import (
	"fmt"
	"strings"
)

// tomlDoc is a TOML document kept as tables of "key = value" lines, in
// order: enough to set keys in Bottlerocket's settings without losing the
// user's own lines (comments, arrays, inline tables are carried as text).
type tomlDoc struct {
	// preamble holds the lines before the first table.
	preamble []string
	tables   []*tomlTable
}

type tomlTable struct {
	name  string
	lines []string
}

// parseTOML splits a document at its [table] headers. Arrays of tables
// ([[x]]) are carried as their own tables.
func parseTOML(text string) (*tomlDoc, error) {
	doc := &tomlDoc{}
	var cur *tomlTable
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "[") {
			name := strings.Trim(trimmed, "[] \t")
			if !strings.HasSuffix(trimmed, "]") || name == "" {
				return nil, fmt.Errorf("line %d: %q is not a TOML table header", i+1, trimmed)
			}
			if strings.HasPrefix(trimmed, "[[") {
				name = "[" + name + "]"
			}
			cur = &tomlTable{name: name}
			doc.tables = append(doc.tables, cur)
			continue
		}
		if cur == nil {
			if trimmed != "" {
				doc.preamble = append(doc.preamble, line)
			}
			continue
		}
		if trimmed != "" {
			cur.lines = append(cur.lines, line)
		}
	}
	return doc, nil
}

// table returns the named table, adding it when missing.
func (d *tomlDoc) table(name string) *tomlTable {
	for _, t := range d.tables {
		if t.name == name {
			return t
		}
	}
	t := &tomlTable{name: name}
	d.tables = append(d.tables, t)
	return t
}

// set replaces key's line, or adds it.
func (t *tomlTable) set(key, value string) {
	line := key + " = " + value
	for i, l := range t.lines {
		k, _, ok := strings.Cut(l, "=")
		if ok && strings.TrimSpace(k) == key {
			t.lines[i] = line
			return
		}
	}
	t.lines = append(t.lines, line)
}

func (d *tomlDoc) String() string {
	var b strings.Builder
	for _, l := range d.preamble {
		b.WriteString(l + "\n")
	}
	for i, t := range d.tables {
		if i > 0 || len(d.preamble) > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "[%s]\n", t.name)
		for _, l := range t.lines {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
