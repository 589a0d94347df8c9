package review

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/taint"
)

// highlights say in words what a reviewer looks for first among a
// release's changes: a container's image, a workload's replicas, and a
// ConfigMap or Secret whose change will not restart the pods that read it
// (their pod template does not move with it). A field a secret reaches is
// never named with its value.
func highlights(baseRes, headRes []manifest.Resource, baseFields, headFields map[manifest.ID][]taint.Field) []string {
	base := make(map[manifest.ID]*unstructured.Unstructured, len(baseRes))
	for _, r := range baseRes {
		base[r.ID()] = r.Object
	}
	var out []string
	templateMoved := map[manifest.ID]bool{}
	for _, r := range headRes {
		id := r.ID()
		before, after := base[id], r.Object
		path := podTemplatePath(id.Kind)
		if before == nil || path == nil {
			continue
		}
		bt, _, _ := unstructured.NestedFieldNoCopy(before.Object, path...)
		at, _, _ := unstructured.NestedFieldNoCopy(after.Object, path...)
		templateMoved[id] = !reflect.DeepEqual(bt, at)
		secret := append(slices.Clone(headFields[id]), baseFields[id]...)
		if namedBySecret(secret) {
			continue // its name is not to be shown (masked everywhere)
		}
		if !touches(secret, "image") {
			was, now := images(before, path), images(after, path)
			for _, name := range slices.Sorted(maps.Keys(now)) {
				if old, ok := was[name]; ok && old != now[name] {
					out = append(out, fmt.Sprintf("image %s → %s (%s %s, container %s)", old, now[name], id.Kind, id.Name, name))
				}
			}
		}
		if !touches(secret, "replicas") {
			was, okB, _ := unstructured.NestedInt64(before.Object, "spec", "replicas")
			now, okA, _ := unstructured.NestedInt64(after.Object, "spec", "replicas")
			if okB && okA && was != now {
				out = append(out, fmt.Sprintf("replicas %d → %d (%s %s)", was, now, id.Kind, id.Name))
			}
		}
	}
	for _, r := range headRes {
		id := r.ID()
		if (id.Kind != "ConfigMap" && id.Kind != "Secret") || id.Group != "" || base[id] == nil ||
			namedBySecret(headFields[id]) || namedBySecret(baseFields[id]) {
			continue
		}
		if reflect.DeepEqual(dataOf(base[id]), dataOf(r.Object)) {
			continue
		}
		var stay []string
		for _, w := range headRes {
			wid := w.ID()
			path := podTemplatePath(wid.Kind)
			if path == nil || wid.Namespace != id.Namespace || templateMoved[wid] || base[wid] == nil || namedBySecret(headFields[wid]) {
				continue
			}
			if reads(w.Object, path, id.Kind, id.Name) {
				stay = append(stay, wid.Kind+" "+wid.Name)
			}
		}
		if len(stay) > 0 {
			out = append(out, fmt.Sprintf("%s %s changes, but %s, which read%s it, will not restart: its pod template does not change (add a checksum annotation of it to the template, or run kubectl rollout restart)",
				id.Kind, id.Name, strings.Join(stay, ", "), map[bool]string{true: "s", false: ""}[len(stay) == 1]))
		}
	}
	return out
}

// podTemplatePath is where a workload kind keeps its pod template; nil
// for other kinds.
func podTemplatePath(kind string) []string {
	switch kind {
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job":
		return []string{"spec", "template"}
	case "CronJob":
		return []string{"spec", "jobTemplate", "spec", "template"}
	}
	return nil
}

// images are a pod template's containers' images by container name (init
// containers too).
func images(u *unstructured.Unstructured, template []string) map[string]string {
	out := map[string]string{}
	for _, list := range []string{"initContainers", "containers"} {
		cs, _, _ := unstructured.NestedSlice(u.Object, append(slices.Clone(template), "spec", list)...)
		for _, c := range cs {
			m, _ := c.(map[string]any)
			name, _ := m["name"].(string)
			image, _ := m["image"].(string)
			if name != "" && image != "" {
				out[name] = image
			}
		}
	}
	return out
}

// reads reports whether a pod template mounts or refers to the ConfigMap
// or Secret name: volumes (projected ones too), envFrom and env.
func reads(u *unstructured.Unstructured, template []string, kind, name string) bool {
	spec, _, _ := unstructured.NestedMap(u.Object, append(slices.Clone(template), "spec")...)
	refKey, volKey, volName := "configMapKeyRef", "configMap", "name"
	fromKey := "configMapRef"
	if kind == "Secret" {
		refKey, volKey, volName, fromKey = "secretKeyRef", "secret", "secretName", "secretRef"
	}
	named := func(m any, key string) bool {
		mm, _ := m.(map[string]any)
		ref, _ := mm[key].(map[string]any)
		n, _ := ref[volName].(string)
		if key == refKey || key == fromKey {
			n, _ = ref["name"].(string)
		}
		return n == name
	}
	vols, _ := spec["volumes"].([]any)
	for _, v := range vols {
		if named(v, volKey) {
			return true
		}
		vm, _ := v.(map[string]any)
		proj, _ := vm["projected"].(map[string]any)
		srcs, _ := proj["sources"].([]any)
		for _, s := range srcs {
			sm, _ := s.(map[string]any)
			ref, _ := sm[volKey].(map[string]any)
			if n, _ := ref["name"].(string); n == name {
				return true
			}
		}
	}
	for _, list := range []string{"initContainers", "containers"} {
		cs, _ := spec[list].([]any)
		for _, c := range cs {
			cm, _ := c.(map[string]any)
			from, _ := cm["envFrom"].([]any)
			for _, f := range from {
				if named(f, fromKey) {
					return true
				}
			}
			env, _ := cm["env"].([]any)
			for _, e := range env {
				em, _ := e.(map[string]any)
				if named(em["valueFrom"], refKey) {
					return true
				}
			}
		}
	}
	return false
}

// touches reports whether a field a secret reaches has label in its path.
func touches(fields []taint.Field, label string) bool {
	for _, f := range fields {
		if slices.Contains(f.Path, label) {
			return true
		}
	}
	return false
}

// namedBySecret reports whether a secret reaches the object's name.
func namedBySecret(fields []taint.Field) bool {
	return slices.ContainsFunc(fields, func(f taint.Field) bool {
		return len(f.Path) == 2 && f.Path[0] == "metadata" && f.Path[1] == "name"
	})
}

// dataOf is what a ConfigMap or Secret holds.
func dataOf(u *unstructured.Unstructured) []any {
	return []any{u.Object["data"], u.Object["stringData"], u.Object["binaryData"]}
}
