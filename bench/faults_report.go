package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// WriteTable prints one row per fault and mode.
func (r *FaultsReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fault\tmode\tcycles\tacknowledged\tlost\tduplicated\treordered\tclient errors\tretried\tdata-loss notices\tgroup redelivered\tcommit errors\trecovery\toutage\tok\t")
	for _, x := range r.Results {
		ok := "yes"
		if !x.OK() {
			ok = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t%v\t%s\t\n", x.Fault, x.Mode, x.Cycles, x.Acknowledged,
			x.Lost, x.Duplicated, x.Reordered, x.ClientErrors, x.Retried, x.DataLoss, x.Redelivered, x.CommitErrors, x.Recovery.Round(time.Millisecond), x.Outage.Round(time.Millisecond), ok)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, x := range r.Results {
		for _, e := range x.Errors {
			fmt.Fprintf(w, "%s/%s: %s\n", x.Fault, x.Mode, e)
		}
		if x.Impairment != "" {
			fmt.Fprintf(w, "%s/%s: %s\n", x.Fault, x.Mode, x.Impairment)
		}
		if x.Unconsumed > 0 || x.Unacked > 0 {
			fmt.Fprintf(w, "%s/%s: %d acknowledged records never consumed by the group, %d records in the log never acknowledged\n", x.Fault, x.Mode, x.Unconsumed, x.Unacked)
		}
	}
	return nil
}

// WriteJSON prints the report as JSON.
func (r *FaultsReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
