package audit

import (
	"fmt"
	"time"
)

// setFailing records a sink failure; the transition is logged once, not
// every failed write.
func (t *Trail) setFailing(err error) {
	t.lastErr.Store(&err)
	if !t.failing.Swap(true) {
		mode := "best-effort: records are dropped and counted until it recovers"
		if t.strict {
			mode = "strict: requests are refused until it recovers"
		}
		t.log.Error("audit sink failed", "err", err, "mode", mode)
	}
}

// setHealthy clears a failure, logging the recovery.
func (t *Trail) setHealthy() {
	if t.failing.Swap(false) {
		t.log.Info("audit sink recovered")
	}
}

// probe opens the sink with an empty write (lumberjack creates the
// directory and file on the first Write).
func (t *Trail) probe() bool {
	if _, err := t.sink.Write(nil); err != nil {
		t.setFailing(fmt.Errorf("open audit sink: %w", err))
		return false
	}
	t.setHealthy()
	return true
}

// run is the writer goroutine: it batches queued records into writes of
// up to maxWriteBytes.
func (t *Trail) run() {
	defer close(t.writerDone)
	buf := make([]byte, 0, maxWriteBytes)
	var retry <-chan time.Time
	for {
		if t.strict && t.failing.Load() && t.sink != nil {
			// The gateway refuses requests while a strict sink fails, so
			// nothing new may arrive to try the sink with: probe it on a
			// timer.
			retry = time.After(t.retry)
		} else {
			retry = nil
		}
		var rec *Record
		select {
		case rec = <-t.queue:
		case <-retry:
			t.probe()
			continue
		case <-t.done:
			t.drain(buf, Level(t.level.Load()) == Full)
			return
		}
		full := Level(t.level.Load()) == Full
		n := 1
		buf = append(rec.AppendJSON(buf[:0], full), '\n')
	batch:
		for len(buf) < maxWriteBytes {
			select {
			case rec = <-t.queue:
				buf = append(rec.AppendJSON(buf, full), '\n')
				n++
			default:
				break batch
			}
		}
		t.write(buf, n)
	}
}

// drain writes what is queued at Close.
func (t *Trail) drain(buf []byte, full bool) {
	for {
		buf, n := buf[:0], 0
	more:
		for len(buf) < maxWriteBytes {
			select {
			case rec := <-t.queue:
				buf = append(rec.AppendJSON(buf, full), '\n')
				n++
			default:
				break more
			}
		}
		if n == 0 {
			return
		}
		t.write(buf, n)
	}
}

// write writes one batch of n records. Best-effort drops the batch on a
// failure; strict retries the unwritten rest until it succeeds or the
// trail is closed, so that no accepted record is lost.
func (t *Trail) write(buf []byte, n int) {
	if t.sink == nil {
		return
	}
	if m := t.maxSizeMiB.Swap(0); m > 0 && t.file != nil {
		// lumberjack reads MaxSize only inside Write, and only this
		// goroutine writes (its mill goroutine reads MaxBackups, which
		// is therefore not changed live).
		t.file.MaxSize = int(m)
	}
	for {
		w, err := t.sink.Write(buf)
		if err == nil {
			t.setHealthy()
			for range n {
				t.hooks.AuditWritten()
			}
			return
		}
		t.setFailing(fmt.Errorf("write audit records: %w", err))
		if !t.strict {
			for range n {
				t.hooks.AuditDropped(DropSinkError)
			}
			return
		}
		if w > 0 && w <= len(buf) {
			buf = buf[w:]
		}
		select {
		case <-time.After(t.retry):
		case <-t.done:
			// Close gives up on a sink that never recovers: one more
			// try, then the records are counted as dropped.
			if _, err := t.sink.Write(buf); err == nil {
				for range n {
					t.hooks.AuditWritten()
				}
				return
			}
			for range n {
				t.hooks.AuditDropped(DropClosed)
			}
			return
		}
	}
}
