package console

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// IO is where a command reads and writes.
type IO struct {
	In       io.Reader // produce reads records from here (nil: os.Stdin)
	Out, Err io.Writer
	Getenv   func(string) string // TOLLGATE_BROKERS, TOLLGATE_PROFILE, HOME... (nil: os.Getenv)
}

// table is a text table with Kafka-tool style upper-case headers,
// columns separated by at least two spaces.
type table struct {
	head []string
	rows [][]any
}

func newTable(head ...string) *table { return &table{head: head} }

func (t *table) row(cells ...any) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, h := range t.head {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, h)
	}
	fmt.Fprintln(tw)
	for _, r := range t.rows {
		for i, c := range r {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
