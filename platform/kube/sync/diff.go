package kubesync

import (
	"fmt"
	"strings"

	"github.com/wI2L/jsondiff"
)

// fieldDiff lists how merged (what applying git would leave) differs from
// live, one line per changed field as "op /json/pointer: value", status
// and server-kept metadata aside. Secrets come masked from ssa.Diff.
func fieldDiff(live, merged map[string]any) []string {
	strip := func(m map[string]any) map[string]any {
		c := deepCopy(m)
		delete(c, "status")
		if md, ok := c["metadata"].(map[string]any); ok {
			for _, k := range []string{"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp"} {
				delete(md, k)
			}
		}
		return c
	}
	patch, err := jsondiff.Compare(strip(live), strip(merged))
	if err != nil {
		return []string{fmt.Sprintf("(no field diff: %v)", err)}
	}
	var out []string
	for _, op := range patch {
		line := op.Type + " " + op.Path
		if op.Type != jsondiff.OperationRemove {
			v := fmt.Sprint(op.Value)
			if len(v) > 120 {
				v = v[:117] + "..."
			}
			line += ": " + strings.ReplaceAll(v, "\n", " ")
		}
		out = append(out, line)
	}
	return out
}
