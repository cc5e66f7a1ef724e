// Package broker is tollgate's built-in, durable, single-node Kafka broker.
//
// The gateway hands it one decoded request header and the raw body at a time
// (Conn.Handle); each API key lives in its own NN_name.go file, registered
// with regKey, and ApiVersions is derived from that registry. Partition logs
// are package broker/storage; this package owns the topic registry (names,
// ids, partition counts, configs, persisted in the data directory), the
// producer id allocator, the group and transaction coordinators (groups.go
// for classic groups, consumer_groups.go for KIP-848 groups, share_groups.go
// for KIP-932 share groups, txns.go; their state is the coordinator
// journal, groups_journal.go), the stats the metrics layer reads (stats.go,
// share_stats.go), and the protocol.
//
// Ownership: the topic registry is guarded by
// Broker.mu, held only to look up or change the map, never across I/O on a
// partition; each partition's log is owned by storage (safe for concurrent
// use); fsync waits, long-poll fetches and sendfile happen with no broker lock
// held.
package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Errors a caller branches on.
var (
	// ErrClosed means the broker or the connection has been closed.
	ErrClosed = errors.New("broker: closed")
	// ErrUnsupportedRequest means a request key or version the broker does
	// not serve; the connection must be closed, as Kafka does. It wraps
	// wire.ErrUnsupportedRequest, so the gateway labels the close as the
	// client's doing.
	ErrUnsupportedRequest = fmt.Errorf("broker: %w", wire.ErrUnsupportedRequest)
	// ErrMalformedRequest means a request body did not decode; it wraps
	// wire.ErrMalformedRequest.
	ErrMalformedRequest = fmt.Errorf("broker: %w", wire.ErrMalformedRequest)
)

// Config configures the built-in broker. Zero values take the defaults
// noted; FsyncInterval, CleanerBackoff and CleanerDedupeBufferBytes take
// the configuration's (configs.DefaultFsyncInterval, DefaultCleanerBackoff,
// DefaultCleanerDedupe: one table for the gateway and the broker).
type Config struct {
	DataDir          string
	Fsync            storage.FsyncPolicy
	FsyncInterval    time.Duration
	AutoCreateTopics bool
	// TopicDefaults holds Kafka config names: num.partitions, retention.ms,
	// retention.bytes, segment.bytes, segment.ms, cleanup.policy,
	// max.message.bytes, message.timestamp.type.
	TopicDefaults map[string]string
	NodeID        int32
	// ClusterID is persisted in the data dir on first start (a random id)
	// if empty.
	ClusterID string
	Logger    *slog.Logger

	// GroupMinSessionTimeout and GroupMaxSessionTimeout bound a JoinGroup's
	// session timeout (group.min/max.session.timeout.ms; 6 s and 30 min).
	GroupMinSessionTimeout time.Duration
	GroupMaxSessionTimeout time.Duration
	// OffsetsRetention is how long an empty group keeps its committed
	// offsets (offsets.retention.minutes; 7 days).
	OffsetsRetention time.Duration
	// TransactionMaxTimeout caps a transactional producer's
	// transaction.timeout.ms (transaction.max.timeout.ms; 15 min).
	TransactionMaxTimeout time.Duration

	// ConsumerGroupSessionTimeout and ConsumerGroupHeartbeatInterval are
	// the KIP-848 group timings (group.consumer.session.timeout.ms and
	// group.consumer.heartbeat.interval.ms; 45 s and 5 s).
	ConsumerGroupSessionTimeout    time.Duration
	ConsumerGroupHeartbeatInterval time.Duration

	// CleanerDedupeBufferBytes bounds the log cleaner's key -> offset map
	// (log.cleaner.dedupe.buffer.size; 128 MiB). The map is sized for the
	// dirty part of the log being cleaned, so it takes less on small logs.
	CleanerDedupeBufferBytes int64
	// CleanerBackoff is how often the log cleaner looks for compacted
	// partitions to clean (log.cleaner.backoff.ms; 15 s).
	CleanerBackoff time.Duration
	// ShareRecordLockDuration and ShareDeliveryCountLimit are the KIP-932
	// share-group defaults (group.share.record.lock.duration.ms and
	// group.share.delivery.count.limit; 30 s and 5); a group may override
	// them with the share.record.lock.duration.ms and
	// share.delivery.count.limit group configs.
	ShareRecordLockDuration time.Duration
	ShareDeliveryCountLimit int

	// Observer, if not nil, is told of every segment fsync and of the
	// record bytes produced and fetched (stats.go).
	Observer Observer
}

// setDefaults fills the zero settings that the configuration also has
// from its one table of defaults (configs.Default*), so a broker opened
// in code behaves as one opened from a configuration file.
func (c *Config) setDefaults() {
	if c.FsyncInterval <= 0 {
		c.FsyncInterval = configs.DefaultFsyncInterval.D()
	}
	if c.CleanerBackoff <= 0 {
		c.CleanerBackoff = configs.DefaultCleanerBackoff.D()
	}
	if c.CleanerDedupeBufferBytes <= 0 {
		c.CleanerDedupeBufferBytes = int64(configs.DefaultCleanerDedupe)
	}
}

// Broker is one open data directory serving Kafka requests.
type Broker struct {
	cfg    Config
	log    *slog.Logger
	syncer *storage.Syncer
	unlock func() error

	defaults topicDefaults // validated TopicDefaults

	mu        sync.RWMutex
	meta      metaFile            // persisted state; guarded by mu
	clusterID string              // set once by load
	topics    map[string]*topic   // by name; guarded by mu
	byID      map[[16]byte]*topic // by topic id; guarded by mu
	// deleting holds the names whose partition folders a delete is still
	// removing (closed when it is done); guarded by mu. A topic of the
	// same name is created only after: it would open the same folders.
	deleting map[string]chan struct{}
	pids     producerIDs // producer id allocator; own lock
	closed   bool        // guarded by mu

	journal *journal        // coordinator state (groups_journal.go)
	groups  *coordinator    // group coordinator (groups.go)
	txns    *txnCoordinator // transaction coordinator (txns.go)
	mirror  *offsetsMirror  // writes __consumer_offsets (offsets_topic.go)

	// advertisedHost/Port are what Metadata and friends report for our
	// node. The gateway rewrites them; tests set them to the test listener.
	advertisedHost string
	advertisedPort int32

	stop chan struct{} // closed by Close: ends the retention loop and long polls

	sessions *fetchSessionCache // KIP-227 fetch sessions

	keylessLog everySecond // rate limit of the keyless-produce warning (cleaner.go)
	bg         sync.WaitGroup
	retainEv   time.Duration
}

// Open locks the data directory, loads the topic registry and recovers every
// partition log. It fails with a clear error if another process (or another
// Broker in this process) holds the directory.
func Open(cfg Config) (*Broker, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("open broker: no data directory configured")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.setDefaults()
	defaults, err := parseTopicDefaults(cfg.TopicDefaults)
	if err != nil {
		return nil, fmt.Errorf("open broker: topic defaults: %w", err)
	}
	if err := mkdirAll(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("open broker: %w", err)
	}
	unlock, err := storage.LockDir(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("open broker: data directory %s is in use (is another tollgate running?): %w", cfg.DataDir, err)
	}
	b := &Broker{
		cfg:            cfg,
		log:            cfg.Logger.With("component", "broker"),
		syncer:         storage.NewSyncer(cfg.Fsync, cfg.FsyncInterval),
		unlock:         unlock,
		defaults:       defaults,
		topics:         make(map[string]*topic),
		byID:           make(map[[16]byte]*topic),
		deleting:       make(map[string]chan struct{}),
		advertisedHost: "localhost",
		advertisedPort: 9092,
		stop:           make(chan struct{}),
		sessions:       newFetchSessionCache(maxFetchSessions),
		retainEv:       30 * time.Second,
	}
	if cfg.Observer != nil {
		b.syncer.SetFsyncObserver(cfg.Observer.FsyncObserved)
	}
	if err := b.load(); err != nil {
		b.closeLogs()
		_ = b.syncer.Close()
		_ = unlock()
		return nil, fmt.Errorf("open broker %s: %w", cfg.DataDir, err)
	}
	if err := b.ensureInternalTopics(); err != nil {
		b.closeLogs()
		_ = b.syncer.Close()
		_ = unlock()
		return nil, fmt.Errorf("open broker %s: %w", cfg.DataDir, err)
	}
	if err := b.openCoordinators(); err != nil {
		b.closeLogs()
		_ = b.syncer.Close()
		_ = unlock()
		return nil, fmt.Errorf("open broker %s: %w", cfg.DataDir, err)
	}
	b.bg.Add(2)
	go b.retentionLoop()
	go b.cleanerLoop()
	b.log.Info("built-in broker open", "data_dir", cfg.DataDir, "topics", len(b.topics), "cluster_id", b.clusterID)
	return b, nil
}

// Close stops background work, flushes and closes every partition log and
// releases the data directory. It is safe to call more than once.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	b.bg.Wait()
	b.groups.stop()
	var errs []error
	if err := b.journal.close(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, b.closeLogs()...)
	if err := b.syncer.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close syncer: %w", err))
	}
	if err := b.unlock(); err != nil {
		errs = append(errs, fmt.Errorf("unlock data dir: %w", err))
	}
	return errors.Join(errs...)
}

// closeLogs flushes and closes every open partition log.
func (b *Broker) closeLogs() []error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for _, t := range b.topics {
		for _, p := range t.partitions {
			if err := p.log.Flush(); err != nil {
				errs = append(errs, fmt.Errorf("flush %s: %w", p.dirName(), err))
			}
			if err := p.log.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", p.dirName(), err))
			}
		}
	}
	return errs
}

// retentionLoop applies retention to every partition on a timer. Storage
// also applies it when a segment rolls.
func (b *Broker) retentionLoop() {
	defer b.bg.Done()
	t := time.NewTicker(b.retainEv)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case now := <-t.C:
			b.applyRetention(now)
		}
	}
}

// applyRetention runs retention on every partition.
func (b *Broker) applyRetention(now time.Time) {
	for _, p := range b.allPartitions() {
		if err := p.log.ApplyRetention(now); err != nil {
			b.log.Warn("apply retention", "partition", p.dirName(), "err", err)
		}
	}
}

// Conn is one client connection's view of the broker.
type Conn struct {
	b      *Broker
	remote string

	closeOnce sync.Once
	done      chan struct{} // closed by Close: cancels pending long polls

	// lastClientID is the client id of the request being handled; set by
	// Handle before the handler runs, read only in a handler's synchronous
	// part (Handle is called from one goroutine per connection).
	lastClientID string
}

// NewConn starts serving a client connection from remote (for logs).
func (b *Broker) NewConn(remote string) *Conn {
	return &Conn{b: b, remote: remote, done: make(chan struct{})}
}

// Close cancels the connection's pending long polls; the client went away.
func (c *Conn) Close() {
	c.closeOnce.Do(func() {
		close(c.done)
		c.b.shareConnClosed(c)
	})
}

// reply is how a handler answers: exactly once, from any goroutine.
type reply func(wire.Body, error)

// handler serves one decoded request.
type handler func(c *Conn, req kmsg.Request, r reply)

type regEntry struct {
	min, max int16
	h        handler
}

// registry maps every API key we serve to its versions and handler; it is
// written only by init functions.
var registry = map[int16]regEntry{}

// regKey registers key's version range and handler. Every NN_name.go file
// calls it from init, and ApiVersions is built from the result.
func regKey(key, min, max int16, h handler) {
	if _, dup := registry[key]; dup || min < 0 || max < min || max > wire.MaxVersion(key) {
		panic(fmt.Sprintf("broker: bad registration of key %d v%d-%d", key, min, max))
	}
	registry[key] = regEntry{min: min, max: max, h: h}
}

// Handle serves one request. done is called exactly once: (body, nil) with
// the response body, (nil, nil) for no response (Produce acks=0), or (nil,
// err) to close the connection. Appends happen before Handle returns, so a
// connection's produce requests land in order; slow completions (fsync
// waits, long polls) call done later from another goroutine.
//
// Buffer ownership is wire.Request's rule: a Produce body
// (wire.BodyReused) is the gateway's pooled buffer, so nothing may keep a
// reference to it (or to the decoded record batches) after Handle returns.
// Appends happen inside Handle, and the durability wait works on the
// response alone.
func (c *Conn) Handle(req *wire.Request, done func(wire.Body, error)) {
	e, ok := registry[req.Key]
	if !ok {
		done(nil, fmt.Errorf("%w: key %d (%s)", ErrUnsupportedRequest, req.Key, kmsg.NameForKey(req.Key)))
		return
	}
	// ApiVersions accepts any version: an unknown one gets the KIP-511 v0
	// answer, which it builds without decoding the body.
	if req.Key == 18 && req.Version > e.max {
		done(apiVersionsUnsupported(e), nil)
		return
	}
	if req.Version < e.min || req.Version > e.max {
		done(nil, fmt.Errorf("%w: %s v%d (serving v%d-%d)", ErrUnsupportedRequest, kmsg.NameForKey(req.Key), req.Version, e.min, e.max))
		return
	}
	if req.ClientID != nil {
		c.lastClientID = *req.ClientID
	}
	kreq := kmsg.RequestForKey(req.Key)
	kreq.SetVersion(req.Version)
	if err := kreq.ReadFrom(req.Body); err != nil {
		done(nil, fmt.Errorf("%w: %s v%d: %w", ErrMalformedRequest, kmsg.NameForKey(req.Key), req.Version, err))
		return
	}
	dedupeRequest(kreq) // dedupe.go
	var once sync.Once
	e.h(c, kreq, func(b wire.Body, err error) {
		once.Do(func() { done(b, err) })
	})
}

// syncHandler adapts a handler that answers immediately with a kmsg response.
func syncHandler[R kmsg.Request](fn func(c *Conn, req R) (kmsg.Response, error)) handler {
	return func(c *Conn, kreq kmsg.Request, r reply) {
		resp, err := fn(c, kreq.(R))
		if err != nil {
			r(nil, err)
			return
		}
		r(encode(resp), nil)
	}
}

// encode encodes a response body with kmsg.
func encode(resp kmsg.Response) wire.Body {
	return wire.Bytes(resp.AppendTo(nil))
}

// storageAppend is the append options for a client produce.
func storageAppend(now time.Time) storage.AppendOptions {
	return storage.AppendOptions{Now: now}
}
