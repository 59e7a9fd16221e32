package fake

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
)

// query is the parameters of an EC2 Query call.
type query url.Values

func (q query) get(key string) string { return url.Values(q).Get(key) }

// list reads a numbered list: prefix.1, prefix.2, ...
func (q query) list(prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := q[fmt.Sprintf("%s.%d", prefix, i)]
		if !ok {
			return out
		}
		out = append(out, v...)
	}
}

// filter is one Filter.N: a name and the values any of which may match.
type filter struct {
	name   string
	values []string
}

func (q query) filters() []filter {
	var out []filter
	for i := 1; ; i++ {
		name := q.get(fmt.Sprintf("Filter.%d.Name", i))
		if name == "" {
			return out
		}
		out = append(out, filter{name: name, values: q.list(fmt.Sprintf("Filter.%d.Value", i))})
	}
}

// fielder gives a resource's values for a filter name ("tag:Name",
// "subnet-id", ...); unknown names give none.
type fielder func(name string) []string

// matches applies every filter (ANDed): one of the resource's values for
// the filter's name must match one of its values, '*' and '?' as
// wildcards.
func matches(field fielder, filters []filter) bool {
	for _, f := range filters {
		have := field(f.name)
		ok := false
		for _, h := range have {
			for _, want := range f.values {
				if m, _ := path.Match(want, h); m {
					ok = true
				}
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// fieldsOf is the fielder of a resource with tags and named fields.
func fieldsOf(tags map[string]string, fields map[string]string) fielder {
	return func(name string) []string {
		if v, ok := tagField(tags, name); ok {
			return v
		}
		if v, ok := fields[name]; ok {
			return []string{v}
		}
		return nil
	}
}

// tagField answers "tag:KEY" and "tag-key" from tags.
func tagField(tags map[string]string, name string) ([]string, bool) {
	if name == "tag-key" {
		keys := make([]string, 0, len(tags))
		for k := range tags {
			keys = append(keys, k)
		}
		return keys, true
	}
	if len(name) > 4 && name[:4] == "tag:" {
		if v, ok := tags[name[4:]]; ok {
			return []string{v}, true
		}
		return nil, true
	}
	return nil, false
}

// page cuts n items at NextToken, MaxResults at a time (maxPage when
// unset), and returns the range and the next token ("" at the end).
func page(q query, n, maxPage int) (from, to int, next string, fault *Fault) {
	if t := q.get("NextToken"); t != "" {
		v, err := strconv.Atoi(t)
		if err != nil || v < 0 || v > n {
			return 0, 0, "", &Fault{Status: http.StatusBadRequest, Code: "InvalidNextToken", Message: fmt.Sprintf("the token %q is not valid", t)}
		}
		from = v
	}
	size := maxPage
	if m := q.get("MaxResults"); m != "" {
		v, err := strconv.Atoi(m)
		if err != nil || v < 1 {
			return 0, 0, "", &Fault{Status: http.StatusBadRequest, Code: "InvalidParameterValue", Message: fmt.Sprintf("MaxResults %q", m)}
		}
		size = min(v, maxPage)
	}
	to = min(from+size, n)
	if to < n {
		next = strconv.Itoa(to)
	}
	return from, to, next, nil
}

// tagSet is EC2's list of tags.
type tagSet struct {
	Items []tagItem `xml:"item"`
}

type tagItem struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

func tagsOf(tags map[string]string) *tagSet {
	if len(tags) == 0 {
		return nil
	}
	out := &tagSet{}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out.Items = append(out.Items, tagItem{Key: k, Value: tags[k]})
	}
	return out
}

// tags reads the tags of TagSpecification.N whose ResourceType is
// resourceType.
func (q query) tags(resourceType string) map[string]string {
	out := map[string]string{}
	for i := 1; ; i++ {
		p := fmt.Sprintf("TagSpecification.%d.", i)
		rt := q.get(p + "ResourceType")
		if rt == "" {
			return out
		}
		if rt != resourceType {
			continue
		}
		for j := 1; ; j++ {
			k := q.get(fmt.Sprintf("%sTag.%d.Key", p, j))
			if k == "" {
				break
			}
			out[k] = q.get(fmt.Sprintf("%sTag.%d.Value", p, j))
		}
	}
}
