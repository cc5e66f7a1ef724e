package configs

import (
	"reflect"
	"strconv"
	"strings"
)

// Changed lists the fields whose values differ between a and b, each
// named by its YAML path as Validate names fields ("limits.max_connections",
// "listeners[0].listen", "audit.sink.max_size"). Both configurations
// should be effective ones (defaults filled, as Load returns them), so a
// field written out with its default value is not a change.
//
// The walk goes down structs field by field; a list of sections
// (listeners, policy rules) is compared entry by entry and named as a
// whole ("listeners") when its length changes; a list of values, a map
// and a scalar are compared as one value. A section that appears or
// disappears (nil on one side: "upstream.tls") is one change. What
// Validate parsed and keeps on the configuration (unexported fields) is
// not configuration and is not compared, nor is a field tagged
// `diff:"-"` (where a value came from); a field kept out of YAML
// (`yaml:"-"`) is named by its section.
func Changed(a, b *Config) []string {
	var out []string
	diffValue(reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem(), "", &out)
	return out
}

func diffValue(a, b reflect.Value, path string, out *[]string) {
	switch a.Kind() {
	case reflect.Pointer:
		switch {
		case a.IsNil() && b.IsNil():
		case a.IsNil() != b.IsNil():
			*out = append(*out, path)
		default:
			diffValue(a.Elem(), b.Elem(), path, out)
		}
	case reflect.Struct:
		t := a.Type()
		hidden := false // a yaml:"-" field differs: named by this section, once
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("diff") == "-" {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			switch name {
			case "-":
				if !hidden && !reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
					hidden = true
					*out = append(*out, path)
				}
				continue
			case "":
				name = strings.ToLower(f.Name)
			}
			diffValue(a.Field(i), b.Field(i), join(path, name), out)
		}
	case reflect.Slice:
		if a.Len() == 0 && b.Len() == 0 {
			return
		}
		if !sectionList(a.Type()) || a.Len() != b.Len() {
			if !reflect.DeepEqual(a.Interface(), b.Interface()) {
				*out = append(*out, path)
			}
			return
		}
		for i := range a.Len() {
			diffValue(a.Index(i), b.Index(i), path+"["+strconv.Itoa(i)+"]", out)
		}
	case reflect.Map:
		if a.Len() == 0 && b.Len() == 0 {
			return
		}
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, path)
		}
	default:
		if !a.Equal(b) {
			*out = append(*out, path)
		}
	}
}

// sectionList reports whether a list holds sections (structs, or
// pointers to them), compared entry by entry.
func sectionList(t reflect.Type) bool {
	e := t.Elem()
	if e.Kind() == reflect.Pointer {
		e = e.Elem()
	}
	return e.Kind() == reflect.Struct
}
