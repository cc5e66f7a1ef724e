package audit

import "sync"

// Subscribe attaches a live subscriber that receives every record f
// matches (nil: all), whatever the sink's level and filter, from now on.
// A subscriber that falls more than a buffer behind loses records
// (counted as DropTapSlow); it never slows the data path. cancel detaches
// it and closes the channel; Close closes it too.
func (t *Trail) Subscribe(f *Filter) (<-chan *Record, func()) {
	if t == nil {
		ch := make(chan *Record)
		close(ch)
		return ch, func() {}
	}
	s := &subscriber{f: f, ch: make(chan *Record, subscriberBuffer)}
	t.subMu.Lock()
	select {
	case <-t.done:
		t.subMu.Unlock()
		close(s.ch)
		return s.ch, func() {}
	default:
	}
	t.subs = append(t.subs, s)
	t.nsubs.Store(int32(len(t.subs)))
	t.subMu.Unlock()
	var once sync.Once
	return s.ch, func() { once.Do(func() { t.unsubscribe(s) }) }
}

func (t *Trail) unsubscribe(s *subscriber) {
	t.subMu.Lock()
	defer t.subMu.Unlock()
	for i, x := range t.subs {
		if x == s {
			t.subs = append(t.subs[:i:i], t.subs[i+1:]...)
			t.nsubs.Store(int32(len(t.subs)))
			close(s.ch)
			return
		}
	}
}

// publish offers rec to every matching subscriber without blocking. The
// read lock keeps cancel from closing a channel mid-send.
func (t *Trail) publish(rec *Record) {
	t.subMu.RLock()
	defer t.subMu.RUnlock()
	for _, s := range t.subs {
		if !s.f.Match(rec) {
			continue
		}
		select {
		case s.ch <- rec:
		default:
			t.hooks.AuditDropped(DropTapSlow)
		}
	}
}
