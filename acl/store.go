package acl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/internal/atomicfile"
)

// MaxBindings bounds the store: a CreateAcls beyond it is refused, so a
// client cannot grow the file (and every authorization) without limit.
const MaxBindings = 100_000

var errFull = errors.New("ACL store full")

// Store holds the ACLs in one file and serves a compiled index of them.
//
// Ownership: writers (Create, Delete) hold mu while they write the file
// and swap the index; readers load the index without locking. A change
// is visible to the next authorization once the file holding it is
// durable; a write that fails changes nothing.
type Store struct {
	path string // "" keeps the ACLs in memory only (tests)
	mu   sync.Mutex
	cur  atomic.Pointer[index]

	// OnWriteError, if set, is told why a change could not be written
	// (the error names the file); the client is told only that the
	// gateway could not store it (kafka.go). Set before the store is
	// used.
	OnWriteError func(error)
}

// Open loads the store kept in path; a missing file is an empty store
// (it is created by the first change).
func Open(path string) (*Store, error) {
	s := &Store{path: path}
	s.cur.Store(compile(nil))
	if path == "" {
		return s, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("acls file: %w", err)
	}
	bs, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("acls file %s: %w", path, err)
	}
	s.cur.Store(compile(bs))
	return s, nil
}

// Path is the file the store keeps its ACLs in.
func (s *Store) Path() string { return s.path }

func (s *Store) index() *index { return s.cur.Load() }

// Bindings returns every ACL, in creation order.
func (s *Store) Bindings() []Binding { return slices.Clone(s.index().bindings) }

// Describe returns the ACLs f matches, in creation order.
func (s *Store) Describe(f Filter) []Binding {
	var out []Binding
	for _, b := range s.index().bindings {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// Create adds bs (each already validated); one already present is not
// added again, as Kafka's authorizers treat a repeated ACL. It returns
// an error, and changes nothing, when the file cannot be written.
func (s *Store) Create(bs []Binding) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.index().bindings
	next := slices.Clone(cur)
	seen := make(map[Binding]bool, len(cur))
	for _, b := range cur {
		seen[b] = true
	}
	for _, b := range bs {
		if !seen[b] {
			seen[b] = true
			next = append(next, b)
		}
	}
	if len(next) == len(cur) {
		return nil
	}
	if len(next) > MaxBindings {
		return fmt.Errorf("%w: the gateway holds at most %d ACLs", errFull, MaxBindings)
	}
	return s.commit(next)
}

// Delete removes the ACLs each filter matches and returns, per filter,
// what it removed (an ACL two filters match is reported by both, as
// Kafka does). It changes nothing when the file cannot be written.
func (s *Store) Delete(fs []Filter) ([][]Binding, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.index().bindings
	out := make([][]Binding, len(fs))
	gone := make([]bool, len(cur))
	n := 0
	for i, f := range fs {
		for j, b := range cur {
			if f.Matches(b) {
				out[i] = append(out[i], b)
				if !gone[j] {
					gone[j] = true
					n++
				}
			}
		}
	}
	if n == 0 {
		return out, nil
	}
	next := make([]Binding, 0, len(cur)-n)
	for j, b := range cur {
		if !gone[j] {
			next = append(next, b)
		}
	}
	if err := s.commit(next); err != nil {
		return nil, err
	}
	return out, nil
}

// commit writes next durably and swaps its index in.
func (s *Store) commit(next []Binding) error {
	if s.path != "" {
		if err := atomicfile.Write(s.path, Encode(next), 0o600); err != nil {
			return fmt.Errorf("write acls file: %w", err)
		}
	}
	s.cur.Store(compile(next))
	return nil
}

// The file: {"version": 1, "acls": [{...}, ...]} with Kafka's names for
// the enums, so an operator can read it (and diff it).

const fileVersion = 1

type fileACL struct {
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

type file struct {
	Version int       `json:"version"`
	ACLs    []fileACL `json:"acls"`
}

// Encode is the file form of bs.
func Encode(bs []Binding) []byte {
	f := file{Version: fileVersion, ACLs: make([]fileACL, 0, len(bs))}
	for _, b := range bs {
		f.ACLs = append(f.ACLs, fileACL{ResourceType: b.ResourceType.String(), ResourceName: b.ResourceName,
			PatternType: b.PatternType.String(), Principal: b.Principal, Host: b.Host,
			Operation: b.Operation.String(), Permission: b.Permission.String()})
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	return append(data, '\n')
}

// Decode reads the file form; every ACL must be valid (Binding.Validate),
// and an ACL listed twice is kept once.
func Decode(data []byte) ([]Binding, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decode: data after the top-level object")
	}
	if f.Version != fileVersion {
		return nil, fmt.Errorf("version %d: this build reads version %d", f.Version, fileVersion)
	}
	if len(f.ACLs) > MaxBindings {
		return nil, fmt.Errorf("%d ACLs: at most %d", len(f.ACLs), MaxBindings)
	}
	var out []Binding
	seen := map[Binding]bool{}
	for i, a := range f.ACLs {
		b, err := a.binding()
		if err == nil {
			err = b.Validate()
		}
		if err != nil {
			return nil, fmt.Errorf("acls[%d]: %w", i, err)
		}
		if !seen[b] {
			seen[b] = true
			out = append(out, b)
		}
	}
	return out, nil
}

func (a fileACL) binding() (Binding, error) {
	var b Binding
	var err error
	if b.ResourceType, err = kmsg.ParseACLResourceType(a.ResourceType); err != nil {
		return b, fmt.Errorf("resource_type: %w", err)
	}
	if b.PatternType, err = kmsg.ParseACLResourcePatternType(a.PatternType); err != nil {
		return b, fmt.Errorf("pattern_type: %w", err)
	}
	if b.Operation, err = kmsg.ParseACLOperation(a.Operation); err != nil {
		return b, fmt.Errorf("operation: %w", err)
	}
	if b.Permission, err = kmsg.ParseACLPermissionType(a.Permission); err != nil {
		return b, fmt.Errorf("permission: %w", err)
	}
	b.ResourceName, b.Principal, b.Host = a.ResourceName, a.Principal, a.Host
	return b, nil
}
