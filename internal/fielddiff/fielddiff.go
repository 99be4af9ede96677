// Package fielddiff says how an object applying git would leave differs
// from the live one, one line per changed field: the sync's dry run and
// the status page's manifest view read the same lines.
package fielddiff

import (
	"fmt"
	"strings"

	"github.com/wI2L/jsondiff"
	"k8s.io/apimachinery/pkg/runtime"
)

// Lines lists how merged (what applying git would leave) differs from
// live, one line per changed field as "op /json/pointer: value", status
// and server-kept metadata aside. Values longer than 120 characters are
// cut. Secrets must come masked (ssa.Diff masks them).
func Lines(live, merged map[string]any) []string {
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

// strip is a copy of m without its status and the metadata the API
// server keeps.
func strip(m map[string]any) map[string]any {
	c := runtime.DeepCopyJSON(m)
	delete(c, "status")
	if md, ok := c["metadata"].(map[string]any); ok {
		for _, k := range []string{"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp"} {
			delete(md, k)
		}
	}
	return c
}
