package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// tapCmd is `tollgate tap`: it connects to a running gateway's admin
// server and prints its live traffic, one line per request/response pair
// (or per connection open and close), until interrupted or the gateway
// goes away.
//
//	tollgate tap                                  # everything, from 127.0.0.1:9089
//	tollgate tap --api Produce,Fetch --topic 'orders*' --client console
//	tollgate tap --admin gw:9099 --json           # the raw JSON records
func tapCmd(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runTap(ctx, args, stdout, stderr)
}

// tapMaxLine bounds one record line; a record lists at most a few
// thousand partitions.
const tapMaxLine = 16 << 20

func runTap(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := fs.String("admin", configs.DefaultAdminListen, "admin server of the gateway (host:port or URL)")
	api := fs.String("api", "", "only these APIs (comma-separated names, keys or groups such as admin)")
	apiNot := fs.String("api-not", "", "not these APIs (comma-separated)")
	topic := fs.String("topic", "", "only requests touching these topics (comma-separated; 'prefix*' for a prefix)")
	client := fs.String("client", "", "only these client ids (comma-separated; 'prefix*' for a prefix)")
	listener := fs.String("listener", "", "only these listeners (comma-separated)")
	asJSON := fs.Bool("json", false, "print the JSON records as they come")
	count := fs.Int("count", 0, "stop after this many records (0: run until interrupted)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tollgate tap [--admin HOST:PORT] [--api A,B] [--topic T] [--client C] [--json]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	u, err := tapURL(*admin, map[string]string{"api": *api, "api_not": *apiNot, "topic": *topic, "client": *client, "listener": *listener})
	if err != nil {
		fmt.Fprintln(stderr, "tollgate tap:", err)
		return 2
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate tap:", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate tap: connect to the admin server: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		fmt.Fprintf(stderr, "tollgate tap: %s: %s\n", resp.Status, strings.TrimSpace(string(body)))
		return 1
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), tapMaxLine)
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	n := 0
	for sc.Scan() {
		if *asJSON {
			out.Write(sc.Bytes())
			out.WriteByte('\n')
		} else {
			var rec audit.Record
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				fmt.Fprintf(stderr, "tollgate tap: bad record: %v\n", err)
				continue
			}
			out.WriteString(tapLine(&rec, time.Local))
			out.WriteByte('\n')
		}
		out.Flush() // lines show up as they happen
		n++
		if *count > 0 && n >= *count {
			return 0
		}
	}
	out.Flush()
	if ctx.Err() != nil {
		return 0 // interrupted
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(stderr, "tollgate tap: stream: %v\n", err)
		return 1
	}
	fmt.Fprintln(stderr, "tollgate tap: the gateway closed the stream")
	return 0
}

// tapURL builds the /tap URL from the --admin value and the filters.
func tapURL(admin string, filters map[string]string) (string, error) {
	if !strings.Contains(admin, "://") {
		admin = "http://" + admin
	}
	u, err := url.Parse(admin)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("--admin %q is not host:port or a URL", admin)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/tap"
	q := url.Values{}
	for k, v := range filters {
		if v != "" {
			q.Set(k, v)
		}
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// tapLine formats a record as one human-readable line:
//
//	10:02:03.118 127.0.0.1:51234 console-producer  Produce v9  quickstart-events[0] 1 rec 27 B acks=-1  → ok offset 3  1.2 ms
func tapLine(r *audit.Record, loc *time.Location) string {
	var b strings.Builder
	b.WriteString(r.Time.In(loc).Format("15:04:05.000"))
	b.WriteByte(' ')
	b.WriteString(orDash(r.ClientAddr))
	switch r.Event {
	case audit.EventConnect:
		fmt.Fprintf(&b, " connect listener=%s", orDash(r.Listener))
		who(&b, r)
		return b.String()
	case audit.EventDisconnect:
		fmt.Fprintf(&b, " %s disconnect (%s)", orDash(r.ClientID), orDash(r.CloseReason))
		return b.String()
	}
	fmt.Fprintf(&b, " %s  %s v%d  ", orDash(r.ClientID), r.API, r.Version)
	b.WriteString(tapSubject(r))
	b.WriteString("  → ")
	b.WriteString(tapOutcome(r))
	if r.LatencyMs > 0 {
		b.WriteString("  ")
		b.WriteString(formatMs(r.LatencyMs))
	}
	return b.String()
}

func who(b *strings.Builder, r *audit.Record) {
	if r.Principal != "" {
		fmt.Fprintf(b, " principal=%s", r.Principal)
	}
	if r.TLSSubject != "" {
		fmt.Fprintf(b, " tls=%q", r.TLSSubject)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// tapMaxParts is how many partitions a line spells out.
const tapMaxParts = 3

// tapSubject says what the request was about: partitions with what was
// sent (Produce) or asked for (Fetch), groups, transactions, resources.
func tapSubject(r *audit.Record) string {
	var parts []string
	total := 0
	for _, t := range r.Topics {
		if len(t.Partitions) == 0 {
			total++
			if len(parts) < tapMaxParts {
				parts = append(parts, t.Name)
			}
			continue
		}
		for _, p := range t.Partitions {
			total++
			if len(parts) >= tapMaxParts {
				continue
			}
			s := fmt.Sprintf("%s[%d]", t.Name, p.Partition)
			switch r.Key {
			case 0: // Produce: what the client sent
				s += fmt.Sprintf(" %d rec %s", p.Records, formatBytes(p.Bytes))
			case 1: // Fetch: from where
				if p.Offset >= 0 {
					s += "@" + strconv.FormatInt(p.Offset, 10)
				}
			}
			parts = append(parts, s)
		}
	}
	if total > len(parts) {
		parts = append(parts, fmt.Sprintf("+%d more", total-len(parts)))
	}
	if r.Group != "" {
		parts = append(parts, "group="+r.Group)
	}
	if r.TransactionalID != "" {
		parts = append(parts, "txn="+r.TransactionalID)
	}
	if len(r.Resources) > 0 && len(r.Topics) == 0 {
		res := r.Resources
		if len(res) > tapMaxParts {
			res = append(res[:tapMaxParts:tapMaxParts], fmt.Sprintf("+%d more", len(r.Resources)-tapMaxParts))
		}
		parts = append(parts, strings.Join(res, " "))
	}
	if r.Acks != nil {
		parts = append(parts, fmt.Sprintf("acks=%d", *r.Acks))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// tapOutcome says how it ended: ok (with the offset or what a fetch
// returned), Kafka error names, a denial or a throttle.
func tapOutcome(r *audit.Record) string {
	var s []string
	switch r.Decision {
	case audit.Denied:
		d := "denied"
		if r.Rule != "" {
			d += " by " + r.Rule
		}
		s = append(s, d)
	case audit.Throttled:
		s = append(s, fmt.Sprintf("throttled %d ms", r.ThrottleMs))
	}
	if len(r.ErrorCodes) > 0 {
		for _, c := range r.ErrorCodes {
			s = append(s, errorName(c))
		}
	} else if r.Decision != audit.Denied {
		s = append(s, "ok"+okDetail(r))
	}
	return strings.Join(s, " ")
}

// okDetail is the offset a produce got, or what a fetch returned.
func okDetail(r *audit.Record) string {
	switch r.Key {
	case 0:
		if r.Acks != nil && *r.Acks == 0 {
			return " (no response)"
		}
		if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 && r.Topics[0].Partitions[0].Offset >= 0 {
			return fmt.Sprintf(" offset %d", r.Topics[0].Partitions[0].Offset)
		}
	case 1:
		recs, bytes := 0, 0
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				recs += p.Records
				bytes += p.Bytes
			}
		}
		return fmt.Sprintf(" %d rec %s", recs, formatBytes(bytes))
	}
	return ""
}

func errorName(c int16) string {
	if e := kerr.TypedErrorForCode(c); e != nil && e.Code == c {
		return e.Message
	}
	return fmt.Sprintf("error %d", c)
}

func formatBytes(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}

func formatMs(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%.2f s", ms/1000)
	}
	return fmt.Sprintf("%.1f ms", ms)
}
