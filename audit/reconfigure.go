package audit

import (
	"errors"

	"github.com/tollgate-kafka/tollgate/configs"
)

// ErrNeedsRestart is returned by Reconfigure for a change the running
// trail cannot take: turning the trail on or off (its sink is opened at
// New), or anything but the level, the filter and the file sink's
// max_size.
var ErrNeedsRestart = errors.New("audit: change needs a restart")

// Reconfigure applies a reloaded audit section to the running trail: the
// level between summary and full, the filter, and the file sink's
// max_size (from the next write). Records already queued are written as
// they were collected. It changes nothing and returns ErrNeedsRestart if
// the level turns the trail on or off; the caller compares the other
// fields (configs.Changed) and applies only these.
func (t *Trail) Reconfigure(cfg configs.Audit) error {
	if t == nil {
		return ErrNeedsRestart
	}
	level, err := ParseLevel(cfg.Level)
	if err != nil {
		return err
	}
	if (level == Off) != (Level(t.level.Load()) == Off) {
		return ErrNeedsRestart
	}
	f, err := NewFilter(cfg.Filter)
	if err != nil {
		return err
	}
	t.level.Store(int32(level))
	t.filter.Store(f)
	if t.file != nil {
		t.maxSizeMiB.Store(int64(cfg.Sink.MaxSizeMiB()))
	}
	return nil
}
