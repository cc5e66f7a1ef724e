package broker

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/twmb/franz-go/pkg/kerr"
)

// metaFileName holds the topic registry, the cluster id and the producer id
// high-water mark. It is replaced atomically (write, fsync, rename, fsync
// the directory) on every change.
const metaFileName = "tollgate-meta.json"

// metaFile is the persisted registry.
type metaFile struct {
	Version   int    `json:"version"`
	ClusterID string `json:"cluster_id"`
	// ProducerIDLimit is the first producer id not yet handed out by any
	// previous run; ids below it are never reused (see producerIDs).
	ProducerIDLimit int64       `json:"producer_id_limit"`
	Topics          []metaTopic `json:"topics"`
}

type metaTopic struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"` // hex of the 16-byte topic id
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// topic is a live topic. Its fields change only under Broker.mu (write
// lock); readers hold the read lock or copy what they need.
type topic struct {
	name       string
	id         [16]byte
	configs    map[string]string // explicit overrides only
	partitions []*partition
}

// partition is one partition and its log.
type partition struct {
	t   *topic
	idx int32
	log *storage.Log
}

func (p *partition) dirName() string { return partitionDir(p.t.name, p.idx) }

func partitionDir(topicName string, idx int32) string {
	return topicName + "-" + strconv.Itoa(int(idx))
}

// Topic name rules, as Kafka's org.apache.kafka.common.internals.Topic.validate.
var legalTopicName = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

const maxTopicNameLen = 249

// errInvalidTopic is returned for names Kafka would reject.
var errInvalidTopic = errors.New("invalid topic name")

// validateTopicName reports why name is not a legal Kafka topic name.
func validateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", errInvalidTopic)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q is not allowed", errInvalidTopic, name)
	case len(name) > maxTopicNameLen:
		return fmt.Errorf("%w: longer than %d characters", errInvalidTopic, maxTopicNameLen)
	case !legalTopicName.MatchString(name):
		return fmt.Errorf("%w: %q contains characters other than ASCII alphanumerics, '.', '_' and '-'", errInvalidTopic, name)
	}
	return nil
}

func mkdirAll(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	return nil
}

// load reads the registry (creating it on first start), opens every
// partition log and removes partition folders of topics that are no longer
// registered (a crash between persisting a deletion and removing folders).
func (b *Broker) load() error {
	path := filepath.Join(b.cfg.DataDir, metaFileName)
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		b.meta = metaFile{Version: 1, ClusterID: b.cfg.ClusterID}
		if b.meta.ClusterID == "" {
			b.meta.ClusterID = randomClusterID()
		}
		if err := b.persistLocked(); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("read %s: %w", metaFileName, err)
	default:
		if err := json.Unmarshal(raw, &b.meta); err != nil {
			return fmt.Errorf("parse %s: %w", metaFileName, err)
		}
	}
	if b.cfg.ClusterID != "" && b.cfg.ClusterID != b.meta.ClusterID {
		return fmt.Errorf("configured cluster id %q does not match %q stored in %s", b.cfg.ClusterID, b.meta.ClusterID, metaFileName)
	}
	b.clusterID = b.meta.ClusterID
	b.pids.init(b, b.meta.ProducerIDLimit)
	want := make(map[string]bool)
	for _, mt := range b.meta.Topics {
		t := &topic{name: mt.Name, configs: mt.Configs}
		idb, err := hex.DecodeString(mt.ID)
		if err != nil || len(idb) != 16 {
			return fmt.Errorf("topic %s: bad id %q in %s", mt.Name, mt.ID, metaFileName)
		}
		copy(t.id[:], idb)
		if t.configs == nil {
			t.configs = map[string]string{}
		}
		lc, err := b.logConfig(t.configs)
		if err != nil {
			return fmt.Errorf("topic %s: %w", mt.Name, err)
		}
		for i := int32(0); i < mt.Partitions; i++ {
			p, err := b.openPartition(t, i, lc)
			if err != nil {
				return err
			}
			t.partitions = append(t.partitions, p)
			want[p.dirName()] = true
		}
		b.topics[t.name] = t
		b.byID[t.id] = t
	}
	b.removeOrphans(want)
	return nil
}

func (b *Broker) openPartition(t *topic, idx int32, lc storage.LogConfig) (*partition, error) {
	p := &partition{t: t, idx: idx}
	l, err := storage.OpenLog(filepath.Join(b.cfg.DataDir, p.dirName()), lc, b.syncer)
	if err != nil {
		return nil, fmt.Errorf("open partition %s: %w", p.dirName(), err)
	}
	p.log = l
	return p, nil
}

// removeOrphans deletes folders that look like partitions ("<legal
// topic>-<n>") but belong to no registered topic.
func (b *Broker) removeOrphans(want map[string]bool) {
	ents, err := os.ReadDir(b.cfg.DataDir)
	if err != nil {
		b.log.Warn("scan data dir for orphaned partitions", "err", err)
		return
	}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || want[name] {
			continue
		}
		dash := strings.LastIndexByte(name, '-')
		if dash <= 0 {
			continue
		}
		if _, err := strconv.ParseUint(name[dash+1:], 10, 31); err != nil || validateTopicName(name[:dash]) != nil {
			continue
		}
		b.log.Warn("removing partition folder of a deleted topic", "dir", name)
		if err := os.RemoveAll(filepath.Join(b.cfg.DataDir, name)); err != nil {
			b.log.Warn("remove orphaned partition", "dir", name, "err", err)
		}
	}
}

// persistLocked writes the registry atomically. Callers hold b.mu for
// writing (or own b exclusively during load).
func (b *Broker) persistLocked() error {
	m := b.meta
	m.Version = 1
	m.ProducerIDLimit = b.pids.limitForPersist()
	m.Topics = m.Topics[:0:0]
	for _, t := range b.topics {
		m.Topics = append(m.Topics, metaTopic{
			Name:       t.name,
			ID:         hex.EncodeToString(t.id[:]),
			Partitions: int32(len(t.partitions)),
			Configs:    t.configs,
		})
	}
	sort.Slice(m.Topics, func(i, j int) bool { return m.Topics[i].Name < m.Topics[j].Name })
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", metaFileName, err)
	}
	if err := writeFileAtomic(b.cfg.DataDir, metaFileName, raw); err != nil {
		return err
	}
	b.meta = m
	return nil
}

// writeFileAtomic replaces dir/name with data so that a crash leaves either
// the old or the new file: write a temporary file, fsync it, rename it over
// the old one, fsync the directory.
func writeFileAtomic(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("replace %s: %w", name, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir for %s: %w", name, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir for %s: %w", name, err)
	}
	return nil
}

// randomClusterID is 16 random bytes in URL-safe base64, the shape of a
// Kafka cluster id (kafka-storage.sh random-uuid).
func randomClusterID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	return base64.RawURLEncoding.EncodeToString(u[:])
}

func randomTopicID() [16]byte {
	var u [16]byte
	_, _ = rand.Read(u[:])
	return u
}

// lookup returns a topic by name, or nil.
func (b *Broker) lookup(name string) *topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.topics[name]
}

// lookupID returns a topic by id, or nil.
func (b *Broker) lookupID(id [16]byte) *topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.byID[id]
}

// partitionOf returns a partition of a topic, or nil.
func (b *Broker) partitionOf(t *topic, idx int32) *partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if t == nil || idx < 0 || int(idx) >= len(t.partitions) {
		return nil
	}
	return t.partitions[idx]
}

// partitionCount returns how many partitions t has.
func (b *Broker) partitionCount(t *topic) int32 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return int32(len(t.partitions))
}

// topicConfigs returns a copy of t's explicit configs.
func (b *Broker) topicConfigs(t *topic) map[string]string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	m := make(map[string]string, len(t.configs))
	for k, v := range t.configs {
		m[k] = v
	}
	return m
}

// sortedTopics returns every topic, sorted by name.
func (b *Broker) sortedTopics() []*topic {
	b.mu.RLock()
	ts := make([]*topic, 0, len(b.topics))
	for _, t := range b.topics {
		ts = append(ts, t)
	}
	b.mu.RUnlock()
	sort.Slice(ts, func(i, j int) bool { return ts[i].name < ts[j].name })
	return ts
}

// allPartitions returns every partition of every topic.
func (b *Broker) allPartitions() []*partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var ps []*partition
	for _, t := range b.topics {
		ps = append(ps, t.partitions...)
	}
	return ps
}

// createSpec is a validated topic creation.
type createSpec struct {
	name       string
	partitions int32
	configs    map[string]string
}

// topicError is a Kafka error for one topic with a human message.
type topicError struct {
	code int16
	msg  string
}

func (e *topicError) Error() string { return e.msg }

func kafkaErr(e *kerr.Error, format string, args ...any) *topicError {
	return &topicError{code: e.Code, msg: fmt.Sprintf(format, args...)}
}

// errCode extracts the Kafka error code of err (0 for nil). Errors that are
// not Kafka errors become KAFKA_STORAGE_ERROR.
func errCode(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	var te *topicError
	if errors.As(err, &te) {
		return te.code, &te.msg
	}
	msg := err.Error()
	return kerr.KafkaStorageError.Code, &msg
}

// checkCreate validates a topic creation: name, partition count, replication
// factor and configs. numPartitions -1 takes the default.
func (b *Broker) checkCreate(name string, numPartitions int32, replication int16, configs map[string]string) (createSpec, error) {
	if err := validateTopicName(name); err != nil {
		return createSpec{}, kafkaErr(kerr.InvalidTopicException, "%v", err)
	}
	if numPartitions == -1 {
		numPartitions = b.defaults.numPartitions
	}
	if numPartitions <= 0 || numPartitions > maxPartitions {
		return createSpec{}, kafkaErr(kerr.InvalidPartitions, "number of partitions must be between 1 and %d, got %d", maxPartitions, numPartitions)
	}
	if replication != -1 && replication != 1 {
		return createSpec{}, kafkaErr(kerr.InvalidReplicationFactor, "replication factor must be 1 (or -1 for the default) on this single-node broker, got %d", replication)
	}
	if err := validateConfigs(configs); err != nil {
		return createSpec{}, err
	}
	if b.lookup(name) != nil {
		return createSpec{}, kafkaErr(kerr.TopicAlreadyExists, "topic %q already exists", name)
	}
	return createSpec{name: name, partitions: numPartitions, configs: configs}, nil
}

// maxPartitions bounds partitions per topic: every partition is a folder
// with open files.
const maxPartitions = 10000

// createTopic creates a validated topic: partition logs first, then the
// registry (a crash in between leaves folders that the next start removes).
func (b *Broker) createTopic(s createSpec) (*topic, error) {
	lc, err := b.logConfig(s.configs)
	if err != nil {
		return nil, kafkaErr(kerr.InvalidConfig, "%v", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for { // a delete of the same name still removing its folders finishes first
		ch := b.deleting[s.name]
		if ch == nil {
			break
		}
		b.mu.Unlock()
		<-ch
		b.mu.Lock()
	}
	if b.closed {
		return nil, ErrClosed
	}
	if b.topics[s.name] != nil {
		return nil, kafkaErr(kerr.TopicAlreadyExists, "topic %q already exists", s.name)
	}
	t := &topic{name: s.name, id: randomTopicID(), configs: s.configs}
	if t.configs == nil {
		t.configs = map[string]string{}
	}
	for i := int32(0); i < s.partitions; i++ {
		p, err := b.openPartition(t, i, lc)
		if err != nil {
			for _, p := range t.partitions {
				_ = p.log.Delete()
			}
			return nil, err
		}
		t.partitions = append(t.partitions, p)
	}
	b.topics[t.name] = t
	b.byID[t.id] = t
	if err := b.persistLocked(); err != nil {
		delete(b.topics, t.name)
		delete(b.byID, t.id)
		for _, p := range t.partitions {
			_ = p.log.Delete()
		}
		return nil, err
	}
	b.log.Info("created topic", "topic", t.name, "partitions", len(t.partitions))
	return t, nil
}

// autoCreate creates name with the defaults if auto-creation is enabled.
func (b *Broker) autoCreate(name string) (*topic, error) {
	s, err := b.checkCreate(name, -1, -1, nil)
	if err != nil {
		return nil, err
	}
	t, err := b.createTopic(s)
	var te *topicError
	if errors.As(err, &te) && te.code == kerr.TopicAlreadyExists.Code {
		// Lost a race with another connection's auto-create.
		if t := b.lookup(name); t != nil {
			return t, nil
		}
	}
	return t, err
}

// deleteTopic removes t: the registry first (so a crash cannot resurrect
// it), then the partition folders. Until the folders are gone the name
// is in b.deleting, and createTopic waits for it: a topic created in
// between opened the same folders, recovered the deleted topic's records
// and then lost its folders to this delete.
func (b *Broker) deleteTopic(t *topic) error {
	if isInternalTopic(t.name) {
		return kafkaErr(kerr.InvalidTopicException, "topic %q is an internal topic and cannot be deleted", t.name)
	}
	b.mu.Lock()
	if b.topics[t.name] != t {
		b.mu.Unlock()
		return kafkaErr(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.name)
	}
	delete(b.topics, t.name)
	delete(b.byID, t.id)
	if err := b.persistLocked(); err != nil {
		b.topics[t.name] = t
		b.byID[t.id] = t
		b.mu.Unlock()
		return err
	}
	parts := t.partitions
	done := make(chan struct{})
	b.deleting[t.name] = done
	b.mu.Unlock()
	var errs []error
	for _, p := range parts {
		if err := p.log.Delete(); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", p.dirName(), err))
		}
	}
	b.mu.Lock()
	delete(b.deleting, t.name)
	b.mu.Unlock()
	close(done)
	if b.groups != nil {
		b.groups.dropShareTopic(t.name, t.id)
	}
	b.log.Info("deleted topic", "topic", t.name)
	if err := errors.Join(errs...); err != nil {
		b.log.Warn("delete topic folders (removed on next start)", "topic", t.name, "err", err)
	}
	return nil
}

// addPartitions grows t to count partitions.
func (b *Broker) addPartitions(t *topic, count int32) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.topics[t.name] != t {
		return kafkaErr(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.name)
	}
	cur := int32(len(t.partitions))
	if count <= cur {
		return kafkaErr(kerr.InvalidPartitions, "topic %q has %d partitions; the new count must be larger, got %d", t.name, cur, count)
	}
	if count > maxPartitions {
		return kafkaErr(kerr.InvalidPartitions, "at most %d partitions per topic", maxPartitions)
	}
	lc, err := b.logConfig(t.configs)
	if err != nil {
		return err
	}
	var added []*partition
	for i := cur; i < count; i++ {
		p, err := b.openPartition(t, i, lc)
		if err != nil {
			for _, p := range added {
				_ = p.log.Delete()
			}
			return err
		}
		added = append(added, p)
	}
	t.partitions = append(t.partitions, added...)
	if err := b.persistLocked(); err != nil {
		t.partitions = t.partitions[:cur]
		for _, p := range added {
			_ = p.log.Delete()
		}
		return err
	}
	b.log.Info("added partitions", "topic", t.name, "partitions", count)
	return nil
}

// setTopicConfigs replaces t's explicit configs (already validated) and
// applies them to every partition log.
func (b *Broker) setTopicConfigs(t *topic, configs map[string]string) error {
	lc, err := b.logConfig(configs)
	if err != nil {
		return kafkaErr(kerr.InvalidConfig, "%v", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.topics[t.name] != t {
		return kafkaErr(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.name)
	}
	old := t.configs
	t.configs = configs
	if err := b.persistLocked(); err != nil {
		t.configs = old
		return err
	}
	for _, p := range t.partitions {
		p.log.SetConfig(lc)
	}
	return nil
}
