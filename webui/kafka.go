package webui

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/console"
)

// TopicRow is one row of the topics page.
type TopicRow struct {
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	Replicas   int    `json:"replication_factor"`
	Records    int64  `json:"records"` // high watermarks minus log starts
}

func (c *Console) topics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), kafkaTimeout)
	defer cancel()
	rows, err := c.topicRows(ctx)
	c.render(w, r, "topics", "Topics", rows, err)
}

func (c *Console) topicRows(ctx context.Context) ([]TopicRow, error) {
	adm, done, err := c.admin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	tds, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	rows := []TopicRow{}
	if len(tds) == 0 {
		return rows, nil
	}
	starts, _ := adm.ListStartOffsets(ctx, tds.Names()...)
	ends, _ := adm.ListEndOffsets(ctx, tds.Names()...)
	for _, td := range tds.Sorted() {
		row := TopicRow{Name: td.Topic, Partitions: len(td.Partitions)}
		for _, p := range td.Partitions {
			row.Replicas = max(row.Replicas, len(p.Replicas))
			s, ok1 := starts.Lookup(td.Topic, p.Partition)
			e, ok2 := ends.Lookup(td.Topic, p.Partition)
			if ok1 && ok2 && s.Err == nil && e.Err == nil {
				row.Records += e.Offset - s.Offset
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func (c *Console) topic(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), kafkaTimeout)
	defer cancel()
	name := r.PathValue("topic")
	adm, done, err := c.admin(ctx)
	var d console.TopicDescription
	if err == nil {
		defer done()
		d, err = console.DescribeTopic(ctx, adm, name)
	}
	// The topic's own settings first, then the defaults, each by name.
	slices.SortStableFunc(d.Configs, func(a, b console.TopicConfig) int {
		switch {
		case a.Default == b.Default:
			return 0
		case !a.Default:
			return -1
		}
		return 1
	})
	c.render(w, r, "topic", "Topic "+name, d, err)
}

// Message is one record of the messages view, rendered as asked.
type Message struct {
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Timestamp time.Time `json:"timestamp"`
	Key       string    `json:"key"`
	Value     string    `json:"value"`
	Headers   []string  `json:"headers"`
	Truncated bool      `json:"truncated"`
}

// Messages is the messages view's data.
type Messages struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	From      string    `json:"from"`
	Limit     int       `json:"limit"`
	Render    string    `json:"render"` // text | json | hex
	Messages  []Message `json:"messages"`
}

// Bounds of the messages view: a page never holds more than
// maxMessages × maxShownBytes of record data.
const (
	defaultMessages = 20
	maxMessages     = 200
	maxShownBytes   = 4096
	messagesWait    = 3 * time.Second // how long to wait for records that are not there yet
)

func (c *Console) messages(w http.ResponseWriter, r *http.Request) {
	m, err := parseMessagesQuery(r)
	if err == nil {
		ctx, cancel := context.WithTimeout(r.Context(), kafkaTimeout)
		defer cancel()
		err = c.readMessages(ctx, &m)
	}
	c.render(w, r, "messages", "Messages of "+m.Topic, m, err)
}

func parseMessagesQuery(r *http.Request) (Messages, error) {
	q := r.URL.Query()
	m := Messages{Topic: r.PathValue("topic"), From: q.Get("from"), Limit: defaultMessages, Render: q.Get("render"), Messages: []Message{}}
	if m.From == "" {
		m.From = "start"
	}
	if m.Render == "" {
		m.Render = "text"
	}
	if m.Render != "text" && m.Render != "json" && m.Render != "hex" {
		return m, fmt.Errorf("%w: render %q: want text, json or hex", errBadRequest, m.Render)
	}
	if p := q.Get("partition"); p != "" {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil || n < 0 {
			return m, fmt.Errorf("%w: partition %q", errBadRequest, p)
		}
		m.Partition = int32(n)
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n <= 0 {
			return m, fmt.Errorf("%w: limit %q", errBadRequest, l)
		}
		m.Limit = min(n, maxMessages)
	}
	return m, nil
}

// readMessages reads up to m.Limit records of one partition from m.From
// (start, end, N, +N, -N, @time — the console's offset syntax), stopping
// at the high watermark.
func (c *Console) readMessages(ctx context.Context, m *Messages) error {
	spec, err := console.ParseOffset(m.From)
	if err != nil {
		return fmt.Errorf("%w: %v", errBadRequest, err)
	}
	adm, done, err := c.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	from, end, err := console.Position(ctx, adm, m.Topic, m.Partition, spec)
	if err != nil {
		return err
	}
	if from >= end {
		return nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.ClientID("tollgate-webui"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{m.Topic: {m.Partition: kgo.NewOffset().At(from)}})}, c.opts.Kafka...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	wctx, cancel := context.WithTimeout(ctx, messagesWait)
	defer cancel()
	for len(m.Messages) < m.Limit {
		fs := cl.PollRecords(wctx, m.Limit-len(m.Messages))
		if wctx.Err() != nil {
			return nil
		}
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("fetch %s[%d]: %w", m.Topic, m.Partition, err)
		}
		last := int64(-1)
		fs.EachRecord(func(rec *kgo.Record) {
			if len(m.Messages) < m.Limit {
				m.Messages = append(m.Messages, renderRecord(rec, m.Render))
			}
			last = rec.Offset
		})
		if last+1 >= end {
			return nil
		}
	}
	return nil
}

func renderRecord(r *kgo.Record, how string) Message {
	msg := Message{Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp, Headers: []string{}}
	var t1, t2 bool
	msg.Key, t1 = renderBytes(r.Key, how)
	msg.Value, t2 = renderBytes(r.Value, how)
	msg.Truncated = t1 || t2
	for _, h := range r.Headers {
		v, _ := renderBytes(h.Value, "text")
		msg.Headers = append(msg.Headers, h.Key+"="+v)
	}
	return msg
}

// renderBytes shows b as text (invalid UTF-8 as hex), indented JSON (if
// it is JSON) or hex, cut at maxShownBytes.
func renderBytes(b []byte, how string) (string, bool) {
	cut := len(b) > maxShownBytes
	if cut {
		b = b[:maxShownBytes]
	}
	switch {
	case b == nil:
		return "", false
	case how == "hex" || !utf8.Valid(b):
		return hex.Dump(b), cut
	case how == "json" && json.Valid(b):
		var v any
		_ = json.Unmarshal(b, &v)
		out, _ := json.MarshalIndent(v, "", "  ")
		return string(out), cut
	}
	return string(b), cut
}

// GroupRow is one row of the groups page.
type GroupRow struct {
	Group    string  `json:"group"`
	Type     string  `json:"type"`
	State    string  `json:"state"`
	Members  int     `json:"members"`
	TotalLag int64   `json:"total_lag"`
	History  []int64 `json:"lag_history"`
	Error    string  `json:"error,omitempty"`
}

func (c *Console) groups(w http.ResponseWriter, r *http.Request) {
	c.viewed()
	ctx, cancel := context.WithTimeout(r.Context(), kafkaTimeout)
	defer cancel()
	rows, err := c.groupRows(ctx)
	c.render(w, r, "groups", "Consumer groups", rows, err)
}

func (c *Console) groupRows(ctx context.Context) ([]GroupRow, error) {
	adm, done, err := c.admin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	gs, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	rows := []GroupRow{}
	if len(gs) == 0 {
		return rows, nil
	}
	ds, errs, err := console.DescribeGroups(ctx, adm, gs.Groups()...)
	if err != nil {
		return nil, err
	}
	for _, g := range gs.Sorted() {
		row := GroupRow{Group: g.Group, Type: g.GroupType, State: g.State}
		if row.Type == "" {
			row.Type = "classic"
		}
		if err := errs[g.Group]; err != nil {
			row.Error = err.Error()
		} else {
			d := ds[g.Group]
			c.hist.addLag(d)
			row.State, row.Members, row.TotalLag = d.State, len(d.Members), d.TotalLag
		}
		row.History = c.hist.totalLagOf(g.Group)
		rows = append(rows, row)
	}
	return rows, nil
}

// GroupPage is a group page's data: the description plus each
// partition's lag history.
type GroupPage struct {
	console.GroupDescription
	History map[string][]int64 `json:"lag_history"` // "topic/partition" -> lag, oldest first
}

func (c *Console) group(w http.ResponseWriter, r *http.Request) {
	c.viewed()
	ctx, cancel := context.WithTimeout(r.Context(), kafkaTimeout)
	defer cancel()
	name := r.PathValue("group")
	gp, err := c.groupPage(ctx, name)
	c.render(w, r, "group", "Group "+name, gp, err)
}

func (c *Console) groupPage(ctx context.Context, name string) (GroupPage, error) {
	adm, done, err := c.admin(ctx)
	if err != nil {
		return GroupPage{}, err
	}
	defer done()
	d, err := console.DescribeGroup(ctx, adm, name)
	if err != nil {
		return GroupPage{}, err
	}
	c.hist.addLag(d)
	gp := GroupPage{GroupDescription: d, History: map[string][]int64{}}
	for _, p := range d.Partitions {
		gp.History[fmt.Sprintf("%s/%d", p.Topic, p.Partition)] = c.hist.lagOf(name, p.Topic, p.Partition)
	}
	return gp, nil
}

// errForbidden is a data-changing action while actions are disabled, or
// one that is not same-origin.
var errForbidden = errors.New("forbidden")

// allowAction checks that actions are enabled and that the request comes
// from the console's own pages (a cross-site form must not change data):
// Sec-Fetch-Site, when sent, must be same-origin, and the Origin header
// (or, without one, the Referer) must name this server as the request's
// Host, with the scheme it was served on. A request carrying neither is
// refused: a browser sends Origin with every form POST, and a script can
// set it. The admin server checks the Host itself against DNS rebinding
// (metrics/adminhost.go), so a matching Origin is this server's.
func (c *Console) allowAction(r *http.Request) error {
	if !c.opts.Actions {
		return fmt.Errorf("%w: the console is read-only (set admin.ui.actions: true to enable actions)", errForbidden)
	}
	var err error
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		err = fmt.Errorf("%w: cross-site request", errForbidden)
	} else if !sameOrigin(r) {
		err = fmt.Errorf("%w: the request's Origin (or Referer) is not this console (%s)", errForbidden, r.Host)
	}
	if err != nil {
		c.refusedAction(r, err)
	}
	return err
}

// refusedAction reports a refused action to the admin server (counted
// and logged rate-limited: any web page can make a browser send one).
func (c *Console) refusedAction(r *http.Request, err error) {
	if c.opts.Refused != nil {
		c.opts.Refused(r, err)
	}
}

// sameOrigin reports whether the request's Origin, or its Referer when it
// has no Origin, is scheme://Host of the request itself.
func sameOrigin(r *http.Request) bool {
	from := r.Header.Get("Origin")
	if from == "" {
		from = r.Header.Get("Referer")
	}
	u, err := url.Parse(from)
	if err != nil || u.Host == "" || r.Host == "" {
		return false // absent, "null" (an opaque origin) or malformed
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return strings.EqualFold(u.Scheme, scheme) && strings.EqualFold(u.Host, r.Host)
}

func (c *Console) createTopic(w http.ResponseWriter, r *http.Request) {
	if err := c.allowAction(r); err != nil {
		c.render(w, r, "topics", "Topics", []TopicRow{}, err)
		return
	}
	name := r.FormValue("name")
	parts, err := strconv.Atoi(r.FormValue("partitions"))
	if name == "" || err != nil || parts <= 0 {
		c.render(w, r, "topics", "Topics", []TopicRow{}, fmt.Errorf("%w: want a name and a positive number of partitions", errBadRequest))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), kafkaTimeout)
	defer cancel()
	adm, done, err := c.admin(ctx)
	if err == nil {
		defer done()
		var resp kadm.CreateTopicResponse
		resp, err = adm.CreateTopic(ctx, int32(parts), -1, nil, name)
		if resp.Err != nil { // kadm returns the topic's error as err too
			err = withMessage(resp.Err, resp.ErrMessage)
		}
	}
	if err != nil {
		// The refusal over the topics as they are, so the page stays usable.
		rows, _ := c.topicRows(ctx)
		if rows == nil {
			rows = []TopicRow{}
		}
		c.render(w, r, "topics", "Topics", rows, fmt.Errorf("create topic %s: %w", name, err))
		return
	}
	http.Redirect(w, r, "/ui/topics/"+url.PathEscape(name), http.StatusSeeOther)
}

// withMessage adds a response's ErrorMessage, when the broker (or the
// gateway's policy) sent one, to the error its code names: the page shows
// what the broker said, not only the code.
func withMessage(err error, msg string) error {
	if err == nil || msg == "" || strings.Contains(err.Error(), msg) {
		return err
	}
	return fmt.Errorf("%w (%s)", err, msg)
}

func (c *Console) seekGroup(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("group")
	fail := func(err error) { c.render(w, r, "group", "Group "+name, GroupPage{}, err) }
	if err := c.allowAction(r); err != nil {
		fail(err)
		return
	}
	spec, err := console.ParseOffset(r.FormValue("to"))
	if err != nil {
		fail(fmt.Errorf("%w: %v", errBadRequest, err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), kafkaTimeout)
	defer cancel()
	adm, done, err := c.admin(ctx)
	if err != nil {
		fail(err)
		return
	}
	defer done()
	if _, err := console.SeekGroup(ctx, adm, name, spec, nil, true); err != nil {
		fail(err)
		return
	}
	http.Redirect(w, r, "/ui/groups/"+url.PathEscape(name), http.StatusSeeOther)
}
