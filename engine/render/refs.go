package render

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"

	"github.com/opmodel/pipeline/engine/suggest"
)

// References between the parts of a release: a name that points nowhere
// renders objects the API server accepts and that do nothing (a
// NetworkPolicy admitting a component that does not exist, a probe on a
// port no container has), so the render checks them. A broken reference
// inside the release is an error; one that may point outside it (a
// ServiceAccount created by someone else) is a warning.

// componentSpec is what the checks read of one component's spec.
type componentSpec struct {
	Workload *struct {
		Replicas           *int64          `json:"replicas"`
		ServiceAccountName string          `json:"serviceAccountName"`
		Volumes            map[string]any  `json:"volumes"`
		Container          containerRefs   `json:"container"`
		Sidecars           []containerRefs `json:"sidecars"`
	} `json:"workload"`
	Service *struct {
		Ports map[string]struct {
			Port       int64 `json:"port"`
			TargetPort any   `json:"targetPort"`
		} `json:"ports"`
	} `json:"service"`
	Ingress *struct {
		ServicePort int64 `json:"servicePort"`
	} `json:"ingress"`
	ServiceAccount *struct {
		Name           string `json:"name"`
		AutomountToken *bool  `json:"automountToken"`
	} `json:"serviceAccount"`
	RBAC          any `json:"rbac"`
	Autoscaling   any `json:"autoscaling"`
	NetworkPolicy *struct {
		Ingress []peerRule `json:"ingress"`
		Egress  []peerRule `json:"egress"`
	} `json:"networkPolicy"`
	DisruptionBudget *struct {
		MinAvailable any `json:"minAvailable"`
	} `json:"disruptionBudget"`
}

type containerRefs struct {
	Name  string `json:"name"`
	Ports map[string]struct {
		ContainerPort int64 `json:"containerPort"`
	} `json:"ports"`
	VolumeMounts map[string]struct {
		Volume string `json:"volume"`
	} `json:"volumeMounts"`
	Probes map[string]struct {
		HTTP *portRef `json:"http"`
		TCP  *portRef `json:"tcp"`
	} `json:"probes"`
}

// portRef is a port given by number or by a container port's name.
type portRef struct {
	Port any `json:"port"`
}

func (p *portRef) port() any {
	if p == nil {
		return nil
	}
	return p.Port
}

type peerRule struct {
	Components []string `json:"components"`
	Namespaces []string `json:"namespaces"`
	CIDRs      []string `json:"cidrs"`
}

// specsOf reads the specs of the components names of comps (a module's
// evaluated #components) as the reference checks read them.
func specsOf(comps cue.Value, names []string) map[string]componentSpec {
	specs := map[string]componentSpec{}
	for _, n := range names {
		var s componentSpec
		_ = comps.LookupPath(cue.MakePath(cue.Str(n), cue.Str("spec"))).Decode(&s)
		specs[n] = s
	}
	return specs
}

// checkReferences returns the broken references of a release's components
// (errors) and the doubtful ones (warnings), from their specs (specsOf);
// comps gives the module's evaluated #components, read only for where a
// broken reference is written.
func checkReferences(specs map[string]componentSpec, names []string, comps func() (cue.Value, error)) (problems map[string][]specProblem, warnings []string) {
	accounts := []string{}
	for _, n := range names {
		if sa := specs[n].ServiceAccount; sa != nil && sa.Name != "" {
			accounts = append(accounts, sa.Name)
		}
	}
	problems = map[string][]specProblem{}
	add := func(comp string, path []cue.Selector, msg string) {
		p := specProblem{path: selPath(path), msg: msg}
		if c, err := comps(); err == nil {
			p.pos = userPos(c.LookupPath(cue.MakePath(append([]cue.Selector{cue.Str(comp)}, path...)...)))
		}
		problems[comp] = append(problems[comp], p)
	}
	for _, n := range names {
		s := specs[n]
		if np := s.NetworkPolicy; np != nil {
			for dir, rules := range map[string][]peerRule{"ingress": np.Ingress, "egress": np.Egress} {
				for i, r := range rules {
					for j, c := range r.Components {
						if !slices.Contains(names, c) {
							add(n, sels("spec", "networkPolicy", dir, i, "components", j),
								fmt.Sprintf("no component %q in this release, so the rule admits nothing; %scomponents: %s", c, dym(c, names), strings.Join(names, ", ")))
						}
					}
				}
			}
		}
		warnings = append(warnings, coherence(n, s)...)
		w := s.Workload
		if w == nil {
			continue
		}
		portNames, portNumbers := declaredPorts(w.Container, w.Sidecars)
		for probe, p := range w.Container.Probes {
			for kind, port := range map[string]any{"http": p.HTTP.port(), "tcp": p.TCP.port()} {
				if port == nil {
					continue
				}
				path := sels("spec", "workload", "container", "probes", probe, kind, "port")
				if msg := checkPort(port, portNames, portNumbers); msg != "" {
					add(n, path, msg)
				}
			}
		}
		vols := make([]string, 0, len(w.Volumes))
		for v := range w.Volumes {
			vols = append(vols, v)
		}
		slices.Sort(vols)
		for key, m := range w.Container.VolumeMounts {
			vol := m.Volume
			if vol == "" {
				vol = key
			}
			if !slices.Contains(vols, vol) {
				add(n, sels("spec", "workload", "container", "volumeMounts", key),
					fmt.Sprintf("mounts volume %q, which spec.workload.volumes does not declare; %svolumes: %s", vol, dym(vol, vols), listOr(vols, "none")))
			}
		}
		if svc := s.Service; svc != nil {
			for name, p := range svc.Ports {
				if p.TargetPort == nil {
					continue
				}
				if msg := checkPort(p.TargetPort, portNames, portNumbers); msg != "" {
					add(n, sels("spec", "service", "ports", name, "targetPort"), msg)
				}
			}
			if in := s.Ingress; in != nil {
				var ports []string
				found := false
				for _, p := range svc.Ports {
					ports = append(ports, strconv.FormatInt(p.Port, 10))
					found = found || p.Port == in.ServicePort
				}
				slices.Sort(ports)
				if !found {
					add(n, sels("spec", "ingress", "servicePort"),
						fmt.Sprintf("the Service has no port %d; its ports: %s", in.ServicePort, listOr(ports, "none")))
				}
			}
		}
		if sa := w.ServiceAccountName; sa != "" && !slices.Contains(accounts, sa) {
			warnings = append(warnings, fmt.Sprintf("component %s: spec.workload.serviceAccountName %q is no ServiceAccount of this release (%s): it must exist in the namespace already%s",
				n, sa, listOr(accounts, "it declares none"), strings.TrimSuffix(" — "+dym(sa, accounts), " — ")))
		}
	}
	return problems, warnings
}

func declaredPorts(main containerRefs, sidecars []containerRefs) ([]string, []int64) {
	var names []string
	var numbers []int64
	for _, c := range append([]containerRefs{main}, sidecars...) {
		for name, p := range c.Ports {
			names = append(names, name)
			numbers = append(numbers, p.ContainerPort)
		}
	}
	slices.Sort(names)
	return names, numbers
}

// checkPort checks a port given by name or number against the
// containers' ports: a name must be declared; a number need not (a
// container may listen on a port it does not declare), so it passes.
func checkPort(port any, names []string, numbers []int64) string {
	name, ok := port.(string)
	if !ok {
		return ""
	}
	if n, err := strconv.ParseInt(name, 10, 64); err == nil && slices.Contains(numbers, n) {
		return ""
	}
	if slices.Contains(names, name) {
		return ""
	}
	return fmt.Sprintf("no container port named %q; %scontainer ports: %s", name, dym(name, names), listOr(names, "none are declared"))
}

func dym(name string, known []string) string {
	if s := suggest.DidYouMean(name, known); s != "" {
		return s + " "
	}
	return ""
}

func sels(labels ...any) []cue.Selector {
	out := make([]cue.Selector, 0, len(labels))
	for _, l := range labels {
		switch l := l.(type) {
		case int:
			out = append(out, cue.Index(l))
		case string:
			out = append(out, cue.Str(l))
		}
	}
	return out
}

func selPath(path []cue.Selector) string {
	parts := make([]string, len(path))
	for i, s := range path {
		parts[i] = s.String()
	}
	return strings.Join(parts, ".")
}

// coherence is what renders and applies but probably does not do what
// was meant.
func coherence(n string, s componentSpec) []string {
	var out []string
	if sa := s.ServiceAccount; sa != nil && s.RBAC != nil && sa.AutomountToken != nil && !*sa.AutomountToken {
		out = append(out, fmt.Sprintf("component %s: its ServiceAccount %s is granted rbac rules but automountToken is false, so its pods cannot use them: drop automountToken (the default mounts the token when rbac is set)", n, sa.Name))
	}
	if np := s.NetworkPolicy; np != nil && s.Ingress != nil {
		onlyComponents := len(np.Ingress) > 0
		for _, r := range np.Ingress {
			onlyComponents = onlyComponents && len(r.Components) > 0 && len(r.Namespaces) == 0 && len(r.CIDRs) == 0
		}
		if onlyComponents || len(np.Ingress) == 0 {
			out = append(out, fmt.Sprintf("component %s has an Ingress, but its networkPolicy admits traffic only from components of this release, so the ingress controller cannot reach it: add a rule {namespaces: [\"<the ingress controller's namespace>\"]}", n))
		}
	}
	w := s.Workload
	if w == nil {
		return out
	}
	if pdb := s.DisruptionBudget; pdb != nil && s.Autoscaling == nil {
		replicas := int64(1)
		if w.Replicas != nil {
			replicas = *w.Replicas
		}
		if min, ok := asInt(pdb.MinAvailable); ok && min >= replicas {
			out = append(out, fmt.Sprintf("component %s: disruptionBudget.minAvailable %d is not below its %d replica(s), so no pod may ever be evicted and node drains block: lower it or raise replicas", n, min, replicas))
		}
	}
	return out
}

// asInt reads a decoded CUE number ("50%" is not one).
func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case float64:
		return int64(n), true
	}
	return 0, false
}
