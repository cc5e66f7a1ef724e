package webui_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// browser is a headless Chromium driven over the DevTools protocol on a
// pipe (--remote-debugging-pipe: commands on its fd 3, answers on fd 4,
// each message JSON ended by a NUL byte).
type browser struct {
	cmd     *exec.Cmd
	in      *os.File
	mu      sync.Mutex
	next    int
	pending map[int]chan cdpMessage
	done    chan struct{}
}

type cdpMessage struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// chromiumPath finds the browser or skips the test.
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on this machine (make deps installs it)")
	return ""
}

func startBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--remote-debugging-pipe", "--window-size=1280,860", "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, outW} // fd 3, fd 4
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	cmdR.Close()
	outW.Close()
	b := &browser{cmd: cmd, in: cmdW, pending: map[int]chan cdpMessage{}, done: make(chan struct{})}
	go b.read(outR)
	t.Cleanup(func() {
		_, _ = b.call("", "Browser.close", nil)
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		cmdW.Close()
	})
	return b
}

func (b *browser) read(r *os.File) {
	defer close(b.done)
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMessage
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil || m.ID == 0 {
			continue // an event
		}
		b.mu.Lock()
		ch := b.pending[m.ID]
		delete(b.pending, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// call sends one command (to a page session, or the browser when
// session is "") and waits for its answer.
func (b *browser) call(session, method string, params any) (json.RawMessage, error) {
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan cdpMessage, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if params == nil {
		msg["params"] = map[string]any{}
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, _ := json.Marshal(msg)
	if _, err := b.in.Write(append(data, 0)); err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		return m.Result, nil
	case <-b.done:
		return nil, errors.New("chromium exited")
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("%s: no answer from chromium", method)
	}
}

// tab is one page.
type tab struct {
	b       *browser
	session string
}

// open loads url in a new tab and waits for the load to complete.
func (b *browser) open(t *testing.T, url string) *tab {
	t.Helper()
	res, err := b.call("", "Target.createTarget", map[string]any{"url": "about:blank"})
	if err != nil {
		t.Fatal(err)
	}
	var target struct{ TargetID string }
	json.Unmarshal(res, &target)
	res, err = b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true})
	if err != nil {
		t.Fatal(err)
	}
	var att struct{ SessionID string }
	json.Unmarshal(res, &att)
	tb := &tab{b: b, session: att.SessionID}
	tb.navigate(t, url)
	return tb
}

func (tb *tab) navigate(t *testing.T, url string) {
	t.Helper()
	if _, err := tb.b.call(tb.session, "Page.navigate", map[string]any{"url": url}); err != nil {
		t.Fatal(err)
	}
	tb.waitFor(t, `document.readyState === "complete" && location.href === `+jsString(url))
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// eval evaluates a JavaScript expression in the page and returns its
// value as a string.
func (tb *tab) eval(t *testing.T, expr string) string {
	t.Helper()
	res, err := tb.b.call(tb.session, "Runtime.evaluate", map[string]any{"expression": "String(" + expr + ")", "returnByValue": true})
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Result struct {
			Value string `json:"value"`
		} `json:"result"`
		ExceptionDetails any `json:"exceptionDetails"`
	}
	json.Unmarshal(res, &r)
	if r.ExceptionDetails != nil {
		t.Fatalf("evaluate %s: %v", expr, r.ExceptionDetails)
	}
	return r.Result.Value
}

// text is the rendered text of the first element matching selector.
func (tb *tab) text(t *testing.T, selector string) string {
	t.Helper()
	return tb.eval(t, `(document.querySelector(`+jsString(selector)+`) || {innerText: "<no "+`+jsString(selector)+`+">"}).innerText`)
}

// waitFor polls a JavaScript condition until it holds (or the test's
// bound of 20 s, which only a broken page reaches).
func (tb *tab) waitFor(t *testing.T, cond string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for tb.eval(t, "!!("+cond+")") != "true" {
		select {
		case <-ctx.Done():
			t.Fatalf("the page never satisfied %s; body:\n%s", cond, tb.eval(t, "document.body ? document.body.innerText : ''"))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// screenshot writes a PNG of the page.
func (tb *tab) screenshot(t *testing.T, path string) {
	t.Helper()
	res, err := tb.b.call(tb.session, "Page.captureScreenshot", map[string]any{"format": "png"})
	if err != nil {
		t.Fatal(err)
	}
	var shot struct{ Data string }
	json.Unmarshal(res, &shot)
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil || len(png) == 0 {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}
