package simulator

import (
	"fmt"
	"io"
	"time"
)

// writeViolations writes the summary's invariants line and each violation
// with its objects, time line and replay command.
func (r *Report) writeViolations(w io.Writer) error {
	if len(r.Violations) == 0 {
		_, err := fmt.Fprintf(w, "  invariants   all %d held\n", len(Invariants))
		return err
	}
	if _, err := fmt.Fprintf(w, "  invariants   %d violation(s)\n", len(r.Violations)); err != nil {
		return err
	}
	for _, v := range r.Violations {
		fmt.Fprintf(w, "\nVIOLATION %s at %s: %s\n", v.Invariant, time.Duration(v.At), v.Message)
		for _, line := range v.Timeline {
			fmt.Fprintf(w, "    %s\n", line)
		}
		if _, err := fmt.Fprintf(w, "  replay: %s\n", v.Replay); err != nil {
			return err
		}
	}
	return nil
}
