package webui_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// awkwardGroup has every character html/template leaves alone in a URL
// path but that changes what the URL means.
const (
	awkwardGroup = "a#b/c?d"
	dottedTopic  = "orders.v1_eu"
)

// escapedNames starts a console with actions and makes a topic with a dot
// and an underscore and a group named awkwardGroup that committed on it.
func escapedNames(t *testing.T) (base string) {
	t.Helper()
	g := startGateway(t, `
listeners: [{ listen: "127.0.0.1:0" }]
broker: { data_dir: `+t.TempDir()+`, fsync: never }
admin: { listen: "127.0.0.1:0", ui: { enabled: true, actions: true } }
`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.Server.Addr(0).String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if r, err := adm.CreateTopic(ctx, 1, -1, nil, dottedTopic); err != nil || r.Err != nil {
		t.Fatalf("create %s: %v %v", dottedTopic, err, r.Err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: dottedTopic, Value: []byte("a")}, &kgo.Record{Topic: dottedTopic, Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := adm.CommitAllOffsets(ctx, awkwardGroup, kadm.Offsets{dottedTopic: {0: {Topic: dottedTopic, Partition: 0, At: 2, LeaderEpoch: -1}}}); err != nil {
		t.Fatal(err)
	}
	return "http://" + g.AdminAddr().String()
}

// TestEscapedNames: links, form actions and redirects carry topic and
// group names as one escaped path segment, so a group named "a#b/c?d"
// links to itself (not to group "a"), its seek form posts to its own
// seek, and the redirects after an action land on the right page.
func TestEscapedNames(t *testing.T) {
	base := escapedNames(t)
	escGroup := url.PathEscape(awkwardGroup) // a%23b%2Fc%3Fd
	body := func(path string) string {
		resp := get(t, base+path, "text/html")
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %.300s", path, resp.Status, b)
		}
		return string(b)
	}
	for path, want := range map[string]string{
		"/ui/groups":                              `href="/ui/groups/` + escGroup + `"`,
		"/ui/groups/" + escGroup:                  `action="/ui/groups/` + escGroup + `/seek"`,
		"/ui/topics":                              `href="/ui/topics/` + dottedTopic + `"`,
		"/ui/topics/" + dottedTopic:               `href="/ui/topics/` + dottedTopic + `/messages"`,
		"/ui/topics/" + dottedTopic + "/messages": `href="/ui/topics/` + dottedTopic + `"`,
	} {
		if b := body(path); !strings.Contains(b, want) {
			t.Errorf("%s lacks %s", path, want)
		}
	}
	if b := body("/ui/groups/" + escGroup); !strings.Contains(b, "Group "+awkwardGroup) {
		t.Errorf("the group page is not group %s", awkwardGroup)
	}

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(path, form string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := post("/ui/groups/"+escGroup+"/seek", "to=start"); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/ui/groups/"+escGroup {
		t.Errorf("seek: %s to %q, want 303 to /ui/groups/%s", r.Status, r.Header.Get("Location"), escGroup)
	}
	if r := post("/ui/topics", "name=made.in_ui&partitions=1"); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/ui/topics/made.in_ui" {
		t.Errorf("create topic: %s to %q", r.Status, r.Header.Get("Location"))
	}
}

// TestEscapedNamesInBrowser: Chromium follows the groups page's link to
// the awkwardly named group and submits its seek form (a same-origin
// POST, which Chromium sends with Origin), landing back on that group
// with its offset reset.
func TestEscapedNamesInBrowser(t *testing.T) {
	b := startBrowser(t)
	base := escapedNames(t)
	page := b.open(t, base+"/ui/groups")
	page.eval(t, `[...document.querySelectorAll("#groups a")].find(a => a.textContent === `+jsString(awkwardGroup)+`).click()`)
	want := base + "/ui/groups/" + url.PathEscape(awkwardGroup)
	page.waitFor(t, `document.readyState === "complete" && location.href === `+jsString(want))
	if h := page.text(t, "h1"); h != "Group "+awkwardGroup {
		t.Fatalf("the link led to %q", h)
	}
	if lag := page.text(t, "#lag"); !strings.Contains(lag, dottedTopic+"\t0\t2\t0\t2\t0") {
		t.Errorf("lag before the reset:\n%q", lag)
	}
	page.eval(t, `document.querySelector("form.action button").click()`)
	page.waitFor(t, `document.readyState === "complete" && location.href === `+jsString(want)+` && document.querySelector("#lag") !== null && document.querySelector("#lag").innerText.includes(`+jsString(dottedTopic+"\t0\t0\t0\t2\t2")+`)`)
	if e := page.eval(t, `document.querySelector(".error") ? document.querySelector(".error").innerText : ""`); e != "" {
		t.Errorf("the seek showed an error: %s", e)
	}

	page.navigate(t, base+"/ui/topics")
	page.eval(t, `[...document.querySelectorAll("#topics a")].find(a => a.textContent === `+jsString(dottedTopic)+`).click()`)
	page.waitFor(t, `document.readyState === "complete" && location.href === `+jsString(base+"/ui/topics/"+dottedTopic))
	if h := page.text(t, "h1"); !strings.Contains(h, dottedTopic) {
		t.Errorf("the topic link led to %q", h)
	}
}
