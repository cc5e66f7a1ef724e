package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/internal/atomicfile"
	yaml "go.yaml.in/yaml/v3"
)

// SCRAM iteration bounds, as Kafka's ScramMechanism (minIterations 4096,
// maxIterations 16384); clients refuse counts outside them too.
const (
	MinIterations     = 4096
	MaxIterations     = 16384
	DefaultIterations = 8192
	saltBytes         = 32
	maxUsersFileBytes = 64 << 20
	maxUserNameBytes  = 255
)

// ErrBadUsersFile is wrapped by LoadUsers when the file is not a valid
// users file (as opposed to unreadable).
var ErrBadUsersFile = errors.New("invalid users file")

// Credential is one user's salted SCRAM credential for one hash (RFC 5802
// section 3): the password itself is never stored.
type Credential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte // H(HMAC(SaltedPassword, "Client Key"))
	ServerKey  []byte // HMAC(SaltedPassword, "Server Key")
}

// scramHashes are the hashes credentials are kept for, by mechanism.
var scramHashes = map[string]func() hash.Hash{
	configs.MechScramSHA256: sha256.New,
	configs.MechScramSHA512: sha512.New,
}

// Users is the content of a users file: per user, one SCRAM credential per
// SCRAM mechanism. PLAIN is checked against the SCRAM-SHA-512 credential
// (or SCRAM-SHA-256 when that is the only one) by deriving it from the
// offered password, so the file never holds anything password-equivalent
// beyond what SCRAM needs.
//
// A Users is not safe for concurrent mutation; the SASL server never
// mutates one, it replaces its snapshot whole on reload.
type Users struct {
	users map[string]map[string]Credential
}

// NewUsers returns an empty set of users.
func NewUsers() *Users { return &Users{users: map[string]map[string]Credential{}} }

type credYAML struct {
	Salt       string `yaml:"salt"`
	Iterations int    `yaml:"iterations"`
	StoredKey  string `yaml:"stored_key"`
	ServerKey  string `yaml:"server_key"`
}

type usersYAML struct {
	Users map[string]map[string]credYAML `yaml:"users"`
}

// LoadUsers reads a users file. A missing file is an error wrapping
// fs.ErrNotExist (`tollgate users add` treats it as empty).
func LoadUsers(path string) (*Users, error) {
	data, err := readSmallFile(path, maxUsersFileBytes)
	if err != nil {
		return nil, fmt.Errorf("read users file: %w", err)
	}
	u, err := parseUsers(data)
	if err != nil {
		return nil, fmt.Errorf("users file %s: %w", path, err)
	}
	return u, nil
}

func parseUsers(data []byte) (*Users, error) {
	var f usersYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %s", ErrBadUsersFile, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	u := NewUsers()
	for name, creds := range f.Users {
		if err := checkUserName(name); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadUsersFile, err)
		}
		if len(creds) == 0 {
			return nil, fmt.Errorf("%w: user %q has no credentials", ErrBadUsersFile, name)
		}
		u.users[name] = map[string]Credential{}
		for mech, cy := range creds {
			c, err := credFromYAML(mech, cy)
			if err != nil {
				return nil, fmt.Errorf("%w: user %q %s: %w", ErrBadUsersFile, name, mech, err)
			}
			u.users[name][mech] = c
		}
	}
	return u, nil
}

func credFromYAML(mech string, cy credYAML) (Credential, error) {
	h, ok := scramHashes[mech]
	if !ok {
		return Credential{}, fmt.Errorf("unknown mechanism: want %s or %s", configs.MechScramSHA256, configs.MechScramSHA512)
	}
	if cy.Iterations < MinIterations || cy.Iterations > MaxIterations {
		return Credential{}, fmt.Errorf("iterations %d out of range %d-%d", cy.Iterations, MinIterations, MaxIterations)
	}
	var c Credential
	c.Iterations = cy.Iterations
	size := h().Size()
	for _, f := range []struct {
		name string
		in   string
		out  *[]byte
		want int
	}{{"salt", cy.Salt, &c.Salt, 0}, {"stored_key", cy.StoredKey, &c.StoredKey, size}, {"server_key", cy.ServerKey, &c.ServerKey, size}} {
		b, err := base64.StdEncoding.DecodeString(f.in)
		if err != nil {
			return Credential{}, fmt.Errorf("%s is not base64", f.name)
		}
		if len(b) == 0 || (f.want > 0 && len(b) != f.want) {
			return Credential{}, fmt.Errorf("%s is %d bytes, want %d", f.name, len(b), max(f.want, 1))
		}
		*f.out = b
	}
	return c, nil
}

// checkUserName refuses names that cannot be typed or logged safely.
func checkUserName(name string) error {
	switch {
	case name == "":
		return errors.New("empty user name")
	case len(name) > maxUserNameBytes:
		return fmt.Errorf("user name longer than %d bytes", maxUserNameBytes)
	case !utf8.ValidString(name):
		return fmt.Errorf("user name %q is not UTF-8", name)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("user name %q starts or ends with a space", name)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("user name %q has a control character", name)
	}
	return nil
}

// DeriveCredential computes a SCRAM credential from a password (RFC 5802:
// SaltedPassword = Hi(password, salt, i)). Like Kafka (ScramFormatter),
// the password's UTF-8 bytes are used as they are, without SASLprep.
func DeriveCredential(mech, password string, salt []byte, iterations int) (Credential, error) {
	h, ok := scramHashes[mech]
	if !ok {
		return Credential{}, fmt.Errorf("derive credential: unknown mechanism %q", mech)
	}
	salted, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		return Credential{}, fmt.Errorf("derive credential: %w", err)
	}
	clientKey := hmacSum(h, salted, "Client Key")
	sum := h()
	sum.Write(clientKey)
	return Credential{
		Salt:       salt,
		Iterations: iterations,
		StoredKey:  sum.Sum(nil),
		ServerKey:  hmacSum(h, salted, "Server Key"),
	}, nil
}

func hmacSum(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// Set adds or replaces a user with fresh salts for both SCRAM hashes.
// iterations 0 means DefaultIterations.
func (u *Users) Set(name, password string, iterations int) error {
	if iterations == 0 {
		iterations = DefaultIterations
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return fmt.Errorf("iterations %d out of range %d-%d (Kafka's SCRAM bounds)", iterations, MinIterations, MaxIterations)
	}
	if err := checkUserName(name); err != nil {
		return err
	}
	if password == "" {
		return errors.New("empty password")
	}
	creds := map[string]Credential{}
	for mech := range scramHashes {
		salt := make([]byte, saltBytes)
		if _, err := rand.Read(salt); err != nil {
			return fmt.Errorf("salt: %w", err)
		}
		c, err := DeriveCredential(mech, password, salt, iterations)
		if err != nil {
			return err
		}
		creds[mech] = c
	}
	u.users[name] = creds
	return nil
}

// Remove deletes a user and reports whether it existed.
func (u *Users) Remove(name string) bool {
	_, ok := u.users[name]
	delete(u.users, name)
	return ok
}

// Names lists the users, sorted.
func (u *Users) Names() []string {
	names := make([]string, 0, len(u.users))
	for n := range u.users {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Mechanisms lists the SCRAM mechanisms a user has credentials for, sorted.
func (u *Users) Mechanisms(name string) []string {
	var out []string
	for m := range u.users[name] {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// Credential returns a user's credential for a SCRAM mechanism.
func (u *Users) Credential(name, mech string) (Credential, bool) {
	c, ok := u.users[name][mech]
	return c, ok
}

// plainCredential is the credential PLAIN checks passwords against.
func (u *Users) plainCredential(name string) (string, Credential, bool) {
	for _, mech := range []string{configs.MechScramSHA512, configs.MechScramSHA256} {
		if c, ok := u.users[name][mech]; ok {
			return mech, c, true
		}
	}
	return "", Credential{}, false
}

const usersHeader = `# tollgate users file: salted SCRAM credentials (RFC 5802), never passwords.
# Maintain it with "tollgate users add|remove|list --file FILE"; a gateway
# that uses it reloads it when it changes. Keep it private: the keys allow
# offline password guessing.
`

// Save writes the users atomically (a temporary file in the same
// directory, fsync, rename, fsync of the directory) with mode 0600.
func (u *Users) Save(path string) error {
	f := usersYAML{Users: map[string]map[string]credYAML{}}
	enc64 := base64.StdEncoding.EncodeToString
	for name, creds := range u.users {
		f.Users[name] = map[string]credYAML{}
		for mech, c := range creds {
			f.Users[name][mech] = credYAML{Salt: enc64(c.Salt), Iterations: c.Iterations, StoredKey: enc64(c.StoredKey), ServerKey: enc64(c.ServerKey)}
		}
	}
	var buf bytes.Buffer
	buf.WriteString(usersHeader)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&f); err != nil {
		return fmt.Errorf("encode users: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("encode users: %w", err)
	}
	return atomicfile.Write(path, buf.Bytes(), 0o600)
}

// Clone returns a copy of the users that can be changed without touching
// u (credentials are immutable once built and are shared).
func (u *Users) Clone() *Users {
	c := NewUsers()
	for name, creds := range u.users {
		m := make(map[string]Credential, len(creds))
		for mech, cr := range creds {
			m[mech] = cr
		}
		c.users[name] = m
	}
	return c
}

// Has reports whether a user has any credential.
func (u *Users) Has(name string) bool { return len(u.users[name]) > 0 }

// CredentialFromSalted builds a SCRAM credential from a salted password
// (RFC 5802: SaltedPassword = Hi(password, salt, i)), what
// AlterUserScramCredentials carries (KIP-554) instead of the password.
func CredentialFromSalted(mech string, salt, saltedPassword []byte, iterations int) (Credential, error) {
	h, ok := scramHashes[mech]
	switch {
	case !ok:
		return Credential{}, fmt.Errorf("unknown SCRAM mechanism %q", mech)
	case iterations < MinIterations || iterations > MaxIterations:
		return Credential{}, fmt.Errorf("iterations %d out of range %d-%d", iterations, MinIterations, MaxIterations)
	case len(salt) == 0:
		return Credential{}, errors.New("empty salt")
	case len(saltedPassword) == 0:
		return Credential{}, errors.New("empty salted password")
	}
	clientKey := hmacSum(h, saltedPassword, "Client Key")
	sum := h()
	sum.Write(clientKey)
	return Credential{
		Salt:       slices.Clone(salt),
		Iterations: iterations,
		StoredKey:  sum.Sum(nil),
		ServerKey:  hmacSum(h, saltedPassword, "Server Key"),
	}, nil
}

// CheckUserName reports why a name cannot be a user in a users file (nil
// if it can).
func CheckUserName(name string) error { return checkUserName(name) }

// SetCredential adds or replaces one mechanism's credential of a user,
// keeping the user's other mechanisms.
func (u *Users) SetCredential(name, mech string, c Credential) error {
	if err := checkUserName(name); err != nil {
		return err
	}
	if _, ok := scramHashes[mech]; !ok {
		return fmt.Errorf("unknown SCRAM mechanism %q", mech)
	}
	if u.users[name] == nil {
		u.users[name] = map[string]Credential{}
	}
	u.users[name][mech] = c
	return nil
}

// RemoveCredential deletes one mechanism's credential of a user (the
// user goes when it was the last) and reports whether it existed.
func (u *Users) RemoveCredential(name, mech string) bool {
	if _, ok := u.users[name][mech]; !ok {
		return false
	}
	delete(u.users[name], mech)
	if len(u.users[name]) == 0 {
		delete(u.users, name)
	}
	return true
}

// UsersFile is the users file the server reads ("" when it has none).
func (s *Server) UsersFile() string {
	if s.users == nil || len(s.users.paths) == 0 {
		return ""
	}
	return s.users.paths[0]
}

// UsersChanged makes the next SASL exchange check the users file at once
// instead of up to a second later: the gateway calls it after it wrote
// the file itself (AlterUserScramCredentials), so a login with the new
// password works as soon as the answer is out.
func (s *Server) UsersChanged() {
	if s.users == nil {
		return
	}
	s.users.mu.Lock()
	s.users.lastCheck = time.Time{}
	s.users.mu.Unlock()
}
