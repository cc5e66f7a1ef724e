package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// MaxFileBytes bounds what Load reads: a configuration is small, and a
// mistaken path (a log, a device) should fail fast rather than fill memory.
const MaxFileBytes = 8 << 20

// Load reads the file at path and parses it (Read, then Validate);
// errors name the path.
func Load(path string) (*Config, error) {
	c, err := Read(path)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Read reads the file at path and decodes it without validating it (see
// Decode): a caller that overlays values of its own (flags) validates the
// effective configuration once, with Validate.
func Read(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("read config %s: larger than %d bytes", path, MaxFileBytes)
	}
	return Decode(data, path)
}

// Parse decodes one YAML document (Decode) and validates it (Validate).
// Every problem is reported, joined with errors.Join, each a *FieldError
// reading "source:line:col: field.path: message".
func Parse(data []byte, source string) (*Config, error) {
	c, err := Decode(data, source)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Decode decodes one YAML document strictly (an unknown field is an
// error), starting from Default: a field the file leaves out keeps its
// default, and a listener or upstream section the file adds starts from
// that section's defaults. It then fills the derived defaults (the first
// listener's name). It does not validate: the problems the decoder found
// in values (a wrong type, an unknown field) are kept and reported by
// Validate together with the rest, so that values set afterwards (flags)
// are validated with the file, once. Only a file that is not YAML at all
// (or holds two documents) fails here.
//
// An empty file, or one of only comments, is the default configuration.
// A null value ("key:" or "key: ~") means the default.
func Decode(data []byte, source string) (*Config, error) {
	if source == "" {
		source = "<config>"
	}
	c := Default()
	d := &decoder{source: source, marks: map[string]mark{}, budget: maxNodeVisits}

	root, err := readDocument(data, source)
	if err != nil {
		return nil, err
	}
	if root != nil {
		d.mark("", root, false, "")
		d.value(root, "", reflect.ValueOf(c).Elem())
	}
	c.meta = &sourceMeta{source: source, marks: d.marks, decodeErrs: d.errs.list(source)}
	c.Policy.setLines(c.meta)
	c.fillDerived()
	return c, nil
}

// fillDerived sets defaults that depend on other fields. Only the first
// listener's name is filled in: the advertised host and the broker port
// base stay empty so that a later change to Listen (a flag) still moves
// them; AdvertisedHost and BrokerPortBaseOrDefault compute them.
func (c *Config) fillDerived() {
	if len(c.Listeners) > 0 && c.Listeners[0].Name == "" {
		c.Listeners[0].Name = DefaultListenerName
	}
}

var yamlLineErr = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// readDocument returns the content node of the only document in data, or
// nil when there is none (empty file, comments, a lone null).
func readDocument(data []byte, source string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(err, data, source)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, syntaxError(err, data, source)
	case !isEmptyDocument(&next):
		return nil, &FieldError{Source: source, Line: next.Line, Column: next.Column,
			Msg: "a second YAML document (after ---): tollgate reads exactly one document per file"}
	}
	if isEmptyDocument(&doc) {
		return nil, nil
	}
	return doc.Content[0], nil
}

func isEmptyDocument(doc *yaml.Node) bool {
	if len(doc.Content) == 0 {
		return true
	}
	n := doc.Content[0]
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// syntaxError turns "yaml: line 3: msg" into a FieldError. The yaml
// package reports the line where the construct it was parsing began (a
// mapping that started lines earlier) and no column, so the position is
// found again by parsing growing prefixes of data: the first prefix that
// fails with the same problem ends where the problem is.
func syntaxError(err error, data []byte, source string) error {
	msg := err.Error()
	line, problem := 0, strings.TrimPrefix(msg, "yaml: ")
	if m := yamlLineErr.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		problem = m[2]
	}
	col := 0
	if l, c := locateProblem(data, problem); l > 0 {
		line, col = l, c
	}
	return &FieldError{Source: source, Line: line, Column: col, Msg: "YAML syntax: " + problem}
}

// maxLocateBytes bounds the prefix search (quadratic in the file's
// lines); a larger file gets the yaml package's line only.
const maxLocateBytes = 64 << 10

// locateProblem returns the 1-based line and column where parsing data
// first fails with problem, or 0, 0.
func locateProblem(data []byte, problem string) (line, col int) {
	if len(data) > maxLocateBytes {
		return 0, 0
	}
	end := 0 // bytes of the lines before the current one
	for n := 1; end < len(data); n++ {
		next := bytes.IndexByte(data[end:], '\n')
		stop := len(data)
		if next >= 0 {
			stop = end + next + 1
		}
		if parseProblem(data[:stop]) == problem {
			for c := end + 1; c <= stop; c++ {
				if parseProblem(data[:c]) == problem {
					return n, c - end
				}
			}
			return n, 1
		}
		end = stop
	}
	return 0, 0
}

// parseProblem is the problem the yaml package reports for data ("" when
// it parses), without its line.
func parseProblem(data []byte) string {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return ""
		}
		if err != nil {
			msg := err.Error()
			if m := yamlLineErr.FindStringSubmatch(msg); m != nil {
				return m[2]
			}
			return strings.TrimPrefix(msg, "yaml: ")
		}
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// maxNodeVisits bounds the work of the decoder. Aliases and merge keys can
// make a small file name the same nodes many times ("billion laughs"); a
// real configuration visits a few hundred.
const maxNodeVisits = 100_000

// decoder walks the YAML node tree alongside the Go value, so that every
// error has the node's line and column and the field's path. The yaml
// package's own struct decoding reports only "line N" and stops
// collecting positions once it fails, which is why it is used only for
// single scalars here.
type decoder struct {
	source string
	marks  map[string]mark
	errs   errorList
	budget int
}

// defaulter is implemented by sections and list entries that start from
// defaults when the file mentions them.
type defaulter interface{ setDefaults() }

// nodeDecoder is implemented by types whose YAML takes more than one shape
// (a word or a mapping, as audit.sink); they decode themselves with the
// decoder's helpers. The value is always addressable: it is a field of
// the Config or an element of a slice the decoder made.
type nodeDecoder interface {
	decodeYAML(d *decoder, n *yaml.Node, path string)
}

var (
	sizeType     = reflect.TypeFor[Size]()
	durationType = reflect.TypeFor[Duration]()
)

func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	e := &FieldError{Source: d.source, Field: path, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs.add(e)
}

func (d *decoder) mark(path string, n *yaml.Node, leaf bool, fp string) {
	d.marks[path] = mark{line: n.Line, col: n.Column, leaf: leaf, fp: fp}
}

// resolve follows aliases.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// spend charges one node visit and reports whether the budget allows it.
func (d *decoder) spend(n *yaml.Node) bool {
	d.budget--
	if d.budget == 0 {
		d.errorf(n, "", "the document expands to more than %d nodes (aliases or merge keys nested too deep)", maxNodeVisits)
	}
	return d.budget > 0
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// value decodes n into v. A null node leaves v as it is (the default),
// except that a pointer becomes nil.
func (d *decoder) value(n *yaml.Node, path string, v reflect.Value) {
	if !d.spend(n) {
		return
	}
	n = d.resolve(n)
	if n.Kind == yaml.AliasNode {
		d.errorf(n, path, "unresolved alias")
		return
	}
	if isNull(n) {
		if v.Kind() == reflect.Pointer {
			v.Set(reflect.Zero(v.Type()))
		}
		return
	}
	if nd, ok := v.Addr().Interface().(nodeDecoder); ok && v.CanAddr() {
		nd.decodeYAML(d, n, path)
		return
	}
	switch v.Type() {
	case sizeType:
		if s, err := decodeSize(n); err != nil {
			d.errorf(n, path, "%s", err)
		} else {
			v.SetInt(int64(s))
			d.mark(path, n, true, fingerprint(s))
		}
		return
	case durationType:
		if t, err := decodeDuration(n); err != nil {
			d.errorf(n, path, "%s", err)
		} else {
			v.SetInt(int64(t))
			d.mark(path, n, true, fingerprint(t))
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		nv := reflect.New(v.Type().Elem())
		if df, ok := nv.Interface().(defaulter); ok {
			df.setDefaults()
		}
		before := d.errs.count()
		d.value(n, path, nv.Elem())
		// A scalar behind a pointer that failed to decode stays unset
		// rather than becoming a pointer to zero; a section keeps what
		// did decode so that later checks still see it.
		if nv.Elem().Kind() == reflect.Struct || d.errs.count() == before {
			v.Set(nv)
		}
	case reflect.Struct:
		d.mapping(n, path, v)
	case reflect.Slice:
		d.slice(n, path, v)
	case reflect.Map:
		d.stringMap(n, path, v)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.errorf(n, path, "want a string, got a %s", kindName(n))
			return
		}
		v.SetString(n.Value)
		d.mark(path, n, true, n.Value)
	case reflect.Int:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			d.errorf(n, path, "want an integer, got %s", describe(n))
			return
		}
		var i int
		if err := n.Decode(&i); err != nil {
			d.errorf(n, path, "%q is not a valid integer: %s", n.Value, errText(err))
			return
		}
		v.SetInt(int64(i))
		d.mark(path, n, true, fingerprint(i))
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			d.errorf(n, path, "want true or false, got %s", describe(n))
			return
		}
		var b bool
		if err := n.Decode(&b); err != nil {
			d.errorf(n, path, "%s", errText(err))
			return
		}
		v.SetBool(b)
		d.mark(path, n, true, fingerprint(b))
	default:
		d.errorf(n, path, "internal error: no decoder for %s", v.Type())
	}
}

// describe names a node for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return fmt.Sprintf("%s %q", kindName(n), n.Value)
	}
	return "a " + kindName(n)
}

// yamlFields maps a struct type's yaml names to field indexes, in order.
func yamlFields(t reflect.Type) (names []string, index map[string]int) {
	index = map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		names = append(names, name)
		index[name] = i
	}
	return names, index
}

type pair struct{ key, val *yaml.Node }

func (d *decoder) mapping(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping of %s, got %s", strings.Join(first(yamlFieldsNames(v.Type()), 4), ", "), describe(n))
		return
	}
	d.mark(path, n, false, "")
	names, index := yamlFields(v.Type())
	for _, p := range d.pairs(n, path, 0) {
		key := p.key.Value
		i, ok := index[key]
		if !ok && path == "" && strings.HasPrefix(key, "x-") {
			// Top-level "x-" keys are ignored, as in Compose files, so
			// they can hold YAML anchors shared by several sections.
			continue
		}
		if !ok {
			d.errorf(p.key, path, "%s", unknownField(key, path, names))
			continue
		}
		d.value(p.val, join(path, key), v.Field(i))
	}
}

func yamlFieldsNames(t reflect.Type) []string { n, _ := yamlFields(t); return n }

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "...")
	}
	return s
}

// pairs lists the key/value pairs of a mapping with merge keys ("<<")
// expanded: the mapping's own keys win over merged ones, and earlier
// merged mappings win over later ones, as the YAML merge spec says.
// Duplicate keys in one mapping are errors.
func (d *decoder) pairs(n *yaml.Node, path string, depth int) []pair {
	var own, merged []pair
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if !d.spend(k) {
			return nil
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, d.mergePairs(val, path, depth)...)
			continue
		}
		k = d.resolve(k)
		if k.Kind != yaml.ScalarNode || isNull(k) {
			d.errorf(k, path, "a key must be a plain name, got %s", describe(k))
			continue
		}
		if prev, dup := seen[k.Value]; dup {
			d.errorf(k, path, "duplicate key %q (first at line %d)", k.Value, prev.Line)
			continue
		}
		seen[k.Value] = k
		own = append(own, pair{k, val})
	}
	for _, p := range merged {
		if _, dup := seen[p.key.Value]; !dup {
			seen[p.key.Value] = p.key
			own = append(own, p)
		}
	}
	return own
}

func (d *decoder) mergePairs(val *yaml.Node, path string, depth int) []pair {
	if depth > 10 {
		d.errorf(val, path, "merge keys (<<) nested more than 10 deep")
		d.budget = -1 // stop: every other path through the merges would say the same
		return nil
	}
	val = d.resolve(val)
	switch val.Kind {
	case yaml.MappingNode:
		return d.pairs(val, path, depth+1)
	case yaml.SequenceNode:
		var out []pair
		seen := map[string]bool{}
		for _, m := range val.Content {
			m = d.resolve(m)
			if m.Kind != yaml.MappingNode {
				d.errorf(m, path, "merge key (<<) wants mappings, got %s", describe(m))
				continue
			}
			for _, p := range d.pairs(m, path, depth+1) {
				if !seen[p.key.Value] {
					seen[p.key.Value] = true
					out = append(out, p)
				}
			}
		}
		return out
	}
	d.errorf(val, path, "merge key (<<) wants a mapping, got %s", describe(val))
	return nil
}

// notYet names sections that later versions add, so the error says so
// rather than suggesting a typo. Paths have list indexes removed.
var notYet = map[string]bool{}

var indexRE = regexp.MustCompile(`\[\d+\]`)

func unknownField(key, path string, names []string) string {
	if notYet[indexRE.ReplaceAllString(join(path, key), "")] {
		return fmt.Sprintf("field %q is not supported in this version of tollgate", key)
	}
	msg := fmt.Sprintf("unknown field %q", key)
	if s := closest(key, names); s != "" {
		return msg + fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg + " (known: " + strings.Join(names, ", ") + ")"
}

// closest returns the name within edit distance 2 of key, if any.
func closest(key string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(key), n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// slice decodes a sequence into a new slice (replacing the default). A
// []string also accepts one scalar, split on commas, so that
// "bootstrap: a:9092,b:9092" reads like Kafka's bootstrap.servers.
func (d *decoder) slice(n *yaml.Node, path string, v reflect.Value) {
	et := v.Type().Elem()
	if et.Kind() == reflect.String && n.Kind == yaml.ScalarNode {
		var items []string
		for _, s := range strings.Split(n.Value, ",") {
			if s = strings.TrimSpace(s); s != "" {
				items = append(items, s)
			}
		}
		v.Set(reflect.ValueOf(items))
		for i := range items {
			d.mark(fmt.Sprintf("%s[%d]", path, i), n, true, items[i])
		}
		d.mark(path, n, false, "")
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, path, "want a list, got %s", describe(n))
		return
	}
	d.mark(path, n, false, "")
	out := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		ev := out.Index(i)
		if df, ok := ev.Addr().Interface().(defaulter); ok {
			df.setDefaults()
		}
		if r := d.resolve(item); isNull(r) {
			d.errorf(r, ip, "empty list entry")
			continue
		}
		d.value(item, ip, ev)
	}
	v.Set(out)
}

// stringMap decodes a mapping of names to scalar values (Broker.Defaults):
// integers, strings and booleans keep their YAML text; a list of scalars
// becomes a comma-separated string, Kafka's form for list-valued configs
// such as cleanup.policy.
func (d *decoder) stringMap(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping of names to values, got %s", describe(n))
		return
	}
	d.mark(path, n, false, "")
	m := map[string]string{}
	for _, p := range d.pairs(n, path, 0) {
		kp := join(path, p.key.Value)
		val := d.resolve(p.val)
		switch {
		case val.Kind == yaml.ScalarNode && !isNull(val):
			m[p.key.Value] = val.Value
		case val.Kind == yaml.SequenceNode:
			var parts []string
			for _, it := range val.Content {
				it = d.resolve(it)
				if it.Kind != yaml.ScalarNode || isNull(it) {
					d.errorf(it, kp, "want a list of plain values, got %s", describe(it))
					continue
				}
				parts = append(parts, it.Value)
			}
			m[p.key.Value] = strings.Join(parts, ",")
		default:
			d.errorf(val, kp, "want a value, got %s", describe(val))
			continue
		}
		d.mark(kp, val, true, m[p.key.Value])
	}
	v.Set(reflect.ValueOf(m))
}

// sortedKeys returns a map's keys in order, for stable error output.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
