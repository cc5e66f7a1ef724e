package webui

import (
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"spark":  sparkline,
	"ints":   joinInts,
	"offset": offsetOrDash,
	"since":  func(t time.Time) string { return time.Since(t).Round(time.Second).String() },
	"clock":  func(t time.Time) string { return t.Format("2006-01-02 15:04:05.000") },
	"rate":   func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"count":  func(f float64) string { return strconv.FormatFloat(f, 'f', 0, 64) },
	"dash":   func(s string) string { return orDash(s) },
	"size":   sizeOf,
	// seg escapes a topic or group name as one URL path segment: Kafka
	// allows '/', '?', '#' and '%' in group ids, which html/template
	// leaves as they are in a URL path.
	"seg":     url.PathEscape,
	"history": func(h map[string][]int64, topic string, p int32) []int64 { return h[fmt.Sprintf("%s/%d", topic, p)] },
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func joinInts(s []int32) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.Itoa(int(v))
	}
	return strings.Join(parts, ",")
}

func offsetOrDash(p *int64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(*p, 10)
}

func sizeOf(p *int64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(*p, 10)
}

// sparkline draws values as an inline SVG polyline (numbers only, so it
// is safe HTML).
func sparkline(vals []int64) template.HTML {
	const w, h = 120, 24
	if len(vals) == 0 {
		return template.HTML(`<span class="muted">no samples</span>`)
	}
	hi := int64(1)
	for _, v := range vals {
		hi = max(hi, v)
	}
	var pts strings.Builder
	for i, v := range vals {
		x := 0.0
		if len(vals) > 1 {
			x = float64(i) * w / float64(len(vals)-1)
		}
		y := h - float64(max(v, 0))*(h-2)/float64(hi) - 1
		fmt.Fprintf(&pts, "%.1f,%.1f ", x, y)
	}
	return template.HTML(fmt.Sprintf(`<svg class="spark" width="%d" height="%d" viewBox="0 0 %d %d" data-points="%d"><polyline points="%s"/></svg>`,
		w, h, w, h, len(vals), strings.TrimSpace(pts.String())))
}
