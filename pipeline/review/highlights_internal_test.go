package review

import (
	"testing"

	"gotest.tools/v3/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/taint"
)

func deployment(name, image string, replicas int64, template map[string]any) manifest.Resource {
	containers := []any{map[string]any{"name": name, "image": image}}
	spec := map[string]any{"containers": containers}
	for k, v := range template {
		spec[k] = v
	}
	return manifest.Resource{Object: &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": name, "namespace": "shop"},
		"spec": map[string]any{"replicas": replicas, "template": map[string]any{"spec": spec}},
	}}}
}

func configMap(name, value string) manifest.Resource {
	return manifest.Resource{Object: &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "shop"},
		"data": map[string]any{"k": value},
	}}}
}

// A review says in words what moves: an image, replicas, and a ConfigMap
// whose readers will not restart; a field a secret reaches is never
// named, nor an object whose name a secret reaches.
func TestHighlights(t *testing.T) {
	readsCfg := map[string]any{"volumes": []any{map[string]any{"name": "c", "configMap": map[string]any{"name": "cfg"}}}}
	rolls := map[string]any{"volumes": []any{map[string]any{"name": "c", "configMap": map[string]any{"name": "cfg"}}}, "x": "checksum-2"}
	base := []manifest.Resource{
		deployment("web", "ghcr.io/example/blog:1.4.2", 3, nil),
		deployment("api", "api:1", 1, readsCfg),
		deployment("worker", "worker:1", 1, map[string]any{"volumes": []any{map[string]any{"name": "c", "configMap": map[string]any{"name": "cfg"}}}, "x": "checksum-1"}),
		deployment("tokened", "private:1", 1, nil),
		configMap("cfg", "a"),
	}
	head := []manifest.Resource{
		deployment("web", "ghcr.io/example/blog:1.5.0", 4, nil),
		deployment("api", "api:1", 1, readsCfg),
		deployment("worker", "worker:1", 1, rolls),
		deployment("tokened", "private:2", 1, nil),
		configMap("cfg", "b"),
	}
	secret := map[manifest.ID][]taint.Field{head[3].ID(): {{Path: []string{"spec", "template", "spec", "containers", "0", "image"}}}}
	assert.DeepEqual(t, highlights(base, head, nil, secret), []string{
		"image ghcr.io/example/blog:1.4.2 → ghcr.io/example/blog:1.5.0 (Deployment web, container web)",
		"replicas 3 → 4 (Deployment web)",
		"ConfigMap cfg changes, but Deployment api, which reads it, will not restart: its pod template does not change (add a checksum annotation of it to the template, or run kubectl rollout restart)",
	})
	// A ConfigMap named from a secret is not named.
	named := map[manifest.ID][]taint.Field{head[4].ID(): {{Path: []string{"metadata", "name"}}}}
	for _, h := range highlights(base, head, nil, named) {
		assert.Assert(t, h[:len("ConfigMap")] != "ConfigMap", h)
	}
}
