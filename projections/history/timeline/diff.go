package timeline

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Change is one changed path of an object between two events: old and new
// are JSON, shortened; empty when the path did not exist.
type Change struct {
	Path string `json:"path"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new,omitempty"`
}

func (c Change) String() string {
	switch {
	case c.Old == "" && c.New == "":
		return c.Path // "(3 more)"
	case c.Old == "":
		return c.Path + ": +" + c.New
	case c.New == "":
		return c.Path + ": -" + c.Old
	}
	return c.Path + ": " + c.Old + "→" + c.New
}

// maxValue is the longest value a Change shows; longer ones are cut.
const maxValue = 60

// ignored paths change on every write and say nothing.
var ignored = map[string]bool{
	"metadata.resourceVersion": true,
	"metadata.managedFields":   true,
}

// Diff lists the paths that differ between two object JSONs (either may
// be empty), sorted, at most limit of them (0: all).
func Diff(prev, cur []byte, limit int) []Change {
	a, b := map[string]string{}, map[string]string{}
	flattenJSON(prev, a)
	flattenJSON(cur, b)
	var out []Change
	for p, v := range b {
		if ignored[p] || ignoredPrefix(p) {
			continue
		}
		if a[p] != v {
			out = append(out, Change{Path: p, Old: short(a[p]), New: short(v)})
		}
	}
	for p, v := range a {
		if _, ok := b[p]; !ok && !ignored[p] && !ignoredPrefix(p) {
			out = append(out, Change{Path: p, Old: short(v)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	if limit > 0 && len(out) > limit {
		out = append(out[:limit], Change{Path: fmt.Sprintf("(%d more)", len(out)-limit)})
	}
	return out
}

func ignoredPrefix(p string) bool { return strings.HasPrefix(p, "metadata.managedFields") }

func short(s string) string {
	if len(s) > maxValue {
		return s[:maxValue-1] + "…"
	}
	return s
}

func flattenJSON(b []byte, out map[string]string) {
	if len(b) == 0 {
		return
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return
	}
	flatten("", v, out)
}

// flatten turns nested objects and arrays into dotted paths
// (spec.template.spec.containers[0].image) with JSON leaves.
func flatten(prefix string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 && prefix != "" {
			out[prefix] = "{}"
		}
		for k, c := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(p, c, out)
		}
	case []any:
		if len(x) == 0 {
			out[prefix] = "[]"
		}
		for i, c := range x {
			flatten(prefix+"["+strconv.Itoa(i)+"]", c, out)
		}
	default:
		b, _ := json.Marshal(x)
		out[prefix] = string(b)
	}
}

// facts are the fields of an object the classification reads.
type facts struct {
	Metadata struct {
		Generation        int64  `json:"generation"`
		DeletionTimestamp string `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		NodeName string `json:"nodeName"`
		Replicas *int32 `json:"replicas"`
		Template struct {
			Spec struct {
				Containers []struct {
					Image string `json:"image"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
	Status struct {
		Phase      string `json:"phase"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
		Replicas          int32 `json:"replicas"`
		ReadyReplicas     int32 `json:"readyReplicas"`
		UpdatedReplicas   int32 `json:"updatedReplicas"`
		AvailableReplicas int32 `json:"availableReplicas"`
	} `json:"status"`
}

func factsOf(b []byte) facts {
	var f facts
	_ = json.Unmarshal(b, &f)
	return f
}

func (f *facts) ready() bool {
	for _, c := range f.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

func (f *facts) images() string {
	var s []string
	for _, c := range f.Spec.Template.Spec.Containers {
		s = append(s, c.Image)
	}
	return strings.Join(s, ",")
}

func replicas(p *int32) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(int(*p))
}

// Step classes: what a change did.
const (
	ClassCreate   = "create"
	ClassSchedule = "schedule"
	ClassStart    = "start"
	ClassReady    = "ready"
	ClassScale    = "scale"
	ClassRollout  = "rollout"
	ClassStatus   = "status"
	ClassUpdate   = "update"
	ClassDelete   = "delete"
)

// classify names what a change did, from the object before and after.
func classify(typ string, resource string, prev, cur facts, changes []Change) (class, what string) {
	switch typ {
	case "ADDED":
		return ClassCreate, "created"
	case "DELETED":
		return ClassDelete, "deleted"
	}
	if prev.Metadata.DeletionTimestamp == "" && cur.Metadata.DeletionTimestamp != "" {
		return ClassDelete, "terminating"
	}
	if resource == "pods" {
		switch {
		case prev.Spec.NodeName == "" && cur.Spec.NodeName != "":
			return ClassSchedule, "scheduled to " + cur.Spec.NodeName
		case prev.Status.Phase != "Running" && cur.Status.Phase == "Running":
			if cur.ready() {
				return ClassStart, "running, ready"
			}
			return ClassStart, "running"
		case !prev.ready() && cur.ready():
			return ClassReady, "ready"
		}
	}
	if a, b := replicas(prev.Spec.Replicas), replicas(cur.Spec.Replicas); a != b {
		return ClassScale, "scaled " + a + "→" + b
	}
	if a, b := prev.images(), cur.images(); a != b {
		return ClassRollout, "image " + a + "→" + b
	}
	status := len(changes) > 0
	for _, c := range changes {
		if !strings.HasPrefix(c.Path, "status.") {
			status = false
		}
	}
	if status {
		if cur.Spec.Replicas != nil {
			return ClassStatus, fmt.Sprintf("status: %d ready, %d updated of %d", cur.Status.ReadyReplicas,
				cur.Status.UpdatedReplicas, *cur.Spec.Replicas)
		}
		if cur.Status.Phase != "" {
			return ClassStatus, "status: " + cur.Status.Phase
		}
		return ClassStatus, "status"
	}
	return ClassUpdate, "updated"
}
