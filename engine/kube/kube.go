// Package kube has one job: select the cluster to talk to and build the
// clients for it.
//
// The selection rule: the kubeconfig is --kubeconfig (or kubeconfig content
// handed over as a secret), else the environment's cluster.kubeConfig, else
// the default loading rules (KUBECONFIG, ~/.kube/config). The context is
// --context, else the environment's cluster.kubeContext, else the
// kubeconfig's current context. A context that was named but does not exist
// is an error listing the contexts that do; it never falls back to the
// current context, because deploying to the wrong cluster is worse than not
// deploying.
//
// Connect makes no network call; Ping does.
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/suggest"
)

// Flags is the cluster the command line asked for (--kubeconfig,
// --context, or kubeconfig content); not pipeline.Selection, which selects
// releases and an environment.
type Flags struct {
	// Kubeconfig is the --kubeconfig path.
	Kubeconfig string
	// Context is the --context name.
	Context string
	// KubeconfigData is kubeconfig content (a CI secret); it wins over
	// Kubeconfig and is never written to disk or quoted in errors.
	KubeconfigData []byte
}

// EnvCluster is the cluster block of the selected environment. The zero
// value means the environment does not name a cluster.
type EnvCluster struct {
	// Name is the environment's name, used in error messages.
	Name string
	// KubeContext is cluster.kubeContext.
	KubeContext string
	// KubeConfig is cluster.kubeConfig; a leading ~/ means the home directory.
	KubeConfig string
	// ImpersonateUser and ImpersonateGroups (comma-separated, so the
	// struct stays comparable) are who every request is made as.
	ImpersonateUser   string
	ImpersonateGroups string
}

// Options tune the clients.
type Options struct {
	// QPS and Burst limit client-side request rates; 1000 and 2000 when
	// zero. Concurrency (8 requests in flight per operation) is what bounds
	// the load on the API server, and API Priority and Fairness protects it;
	// the rate limit is only a safety net. client-go's 5/10 made a large
	// release crawl, and even 200/400 was the bottleneck: 500 objects took
	// 3.0 s at 200/400 and 1.9 s at 1000/2000 on the test control plane.
	QPS   float32
	Burst int
}

const (
	defaultQPS   = 1000
	defaultBurst = 2000
)

// Cluster is a selected cluster and the clients for it.
type Cluster struct {
	Config    *rest.Config
	Context   string
	Server    string
	Dynamic   dynamic.Interface
	Clientset kubernetes.Interface
	// Metadata lists objects' metadata only (PartialObjectMetadata).
	Metadata metadata.Interface
	// Mapper resolves kinds to resources through discovery, lazily and
	// cached in memory; Reset it after installing CRDs.
	Mapper    meta.ResettableRESTMapper
	Discovery discovery.CachedDiscoveryInterface
	// Identity is the user every request is impersonated as, or "" for
	// the kubeconfig's own credentials.
	Identity string
}

// Connect selects the kubeconfig and context by the package's rule and
// builds clients. It does not contact the cluster.
func Connect(ctx context.Context, sel Flags, env EnvCluster, opts Options) (*Cluster, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	raw, source, rules, err := loadKubeconfig(sel, env)
	if err != nil {
		return nil, fault.Wrap(fault.Connectivity, err)
	}
	name, err := chooseContext(raw, source, sel, env)
	if err != nil {
		return nil, fault.Wrap(fault.Connectivity, err)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, &clientcmd.ConfigOverrides{}, rules).ClientConfig()
	if err != nil {
		return nil, fault.Wrap(fault.Connectivity, fmt.Errorf("context %q in %s is not usable: %w", name, source, err))
	}
	if env.ImpersonateUser != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: env.ImpersonateUser}
		if env.ImpersonateGroups != "" {
			cfg.Impersonate.Groups = strings.Split(env.ImpersonateGroups, ",")
		}
	}
	return FromConfig(cfg, name, opts)
}

// FromConfig builds clients for an already resolved configuration, such as
// a test cluster's. cfg is copied, not modified.
func FromConfig(cfg *rest.Config, contextName string, opts Options) (*Cluster, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	if cfg.QPS == 0 {
		cfg.QPS = defaultQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = defaultBurst
	}

	// envtest and some kubeconfigs end the host with "/"; the summary line
	// should read the same either way.
	c := &Cluster{Config: cfg, Context: contextName, Server: strings.TrimSuffix(cfg.Host, "/"), Identity: cfg.Impersonate.UserName}
	var err error
	if c.Clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fault.Wrap(fault.Connectivity, fmt.Errorf("build clientset for %s: %w", c, err))
	}
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, fault.Wrap(fault.Connectivity, fmt.Errorf("build dynamic client for %s: %w", c, err))
	}
	if c.Metadata, err = metadata.NewForConfig(cfg); err != nil {
		return nil, fault.Wrap(fault.Connectivity, fmt.Errorf("build metadata client for %s: %w", c, err))
	}
	c.Discovery = memory.NewMemCacheClient(c.Clientset.Discovery())
	c.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(c.Discovery)
	return c, nil
}

// String is the summary line's name for the cluster.
func (c *Cluster) String() string {
	if c.Context == "" {
		return c.Server
	}
	return fmt.Sprintf("context %s (%s)", c.Context, c.Server)
}

// Ping asks the server for its version, to fail early and clearly when the
// cluster is unreachable. A server that rejects the credentials keeps its
// permission class.
func (c *Cluster) Ping(ctx context.Context) error {
	body, err := c.Clientset.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		err = fmt.Errorf("cannot reach the cluster of %s: %w", c, err)
		if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
			return err
		}
		return fault.Wrap(fault.Connectivity, err)
	}
	var v version.Info
	if err := json.Unmarshal(body, &v); err != nil || v.GitVersion == "" {
		return fault.Connectivityf("%s did not answer /version like a Kubernetes API server", c)
	}
	return nil
}

// loadKubeconfig returns the merged kubeconfig, a description of where it
// came from for messages, and the loading rules (nil for inline data).
func loadKubeconfig(sel Flags, env EnvCluster) (*clientcmdapi.Config, string, clientcmd.ClientConfigLoader, error) {
	if len(sel.KubeconfigData) > 0 {
		const source = "the kubeconfig data"
		cfg, err := clientcmd.Load(sel.KubeconfigData)
		if err != nil {
			// The parser's message can quote the input, which may hold
			// credentials: report only that it failed.
			return nil, "", nil, fmt.Errorf("%s is not a valid kubeconfig (%d bytes)", source, len(sel.KubeconfigData))
		}
		return cfg, source, nil, nil
	}

	var rules *clientcmd.ClientConfigLoadingRules
	var source string
	switch {
	case sel.Kubeconfig != "":
		rules = &clientcmd.ClientConfigLoadingRules{ExplicitPath: expandHome(sel.Kubeconfig)}
		source = fmt.Sprintf("kubeconfig %s (--kubeconfig)", rules.ExplicitPath)
	case env.KubeConfig != "":
		rules = &clientcmd.ClientConfigLoadingRules{ExplicitPath: expandHome(env.KubeConfig)}
		source = fmt.Sprintf("kubeconfig %s (cluster.kubeConfig of environment %q)", rules.ExplicitPath, env.Name)
	default:
		rules = clientcmd.NewDefaultClientConfigLoadingRules()
		source = "kubeconfig " + strings.Join(rules.GetLoadingPrecedence(), string(filepath.ListSeparator))
	}
	cfg, err := rules.Load()
	if err != nil {
		return nil, "", nil, fmt.Errorf("load %s: %w", source, err)
	}
	if rules.ExplicitPath == "" && len(cfg.Contexts) == 0 {
		return nil, "", nil, fmt.Errorf("no usable kubeconfig: none with contexts at %s; set KUBECONFIG, pass --kubeconfig or set the environment's cluster.kubeConfig",
			strings.Join(rules.GetLoadingPrecedence(), string(filepath.ListSeparator)))
	}
	return cfg, source, rules, nil
}

// contextHint is "did you mean …? " for a mistyped context, or "".
func contextHint(name string, cfg *clientcmdapi.Config) string {
	names := make([]string, 0, len(cfg.Contexts))
	for n := range cfg.Contexts {
		names = append(names, n)
	}
	slices.Sort(names)
	if s := suggest.DidYouMean(name, names); s != "" {
		return s + " "
	}
	return ""
}

// chooseContext applies the context half of the rule.
func chooseContext(cfg *clientcmdapi.Config, source string, sel Flags, env EnvCluster) (string, error) {
	switch {
	case sel.Context != "":
		if _, ok := cfg.Contexts[sel.Context]; !ok {
			return "", fmt.Errorf("context %q (--context) is not in %s; %scontexts there: %s", sel.Context, source, contextHint(sel.Context, cfg), contextList(cfg))
		}
		return sel.Context, nil
	case env.KubeContext != "":
		if _, ok := cfg.Contexts[env.KubeContext]; !ok {
			return "", fmt.Errorf("environment %q names kubeContext %q, which is not in %s; %scontexts there: %s (point --kubeconfig or the environment's cluster.kubeConfig at the file that has it, or add it: kubectl config set-context %s --cluster … --user …)",
				env.Name, env.KubeContext, source, contextHint(env.KubeContext, cfg), contextList(cfg), env.KubeContext)
		}
		return env.KubeContext, nil
	case cfg.CurrentContext == "":
		return "", fmt.Errorf("%s has no current context: pass --context or set the environment's cluster.kubeContext; contexts there: %s", source, contextList(cfg))
	default:
		if _, ok := cfg.Contexts[cfg.CurrentContext]; !ok {
			return "", fmt.Errorf("current context %q of %s does not exist; contexts there: %s", cfg.CurrentContext, source, contextList(cfg))
		}
		return cfg.CurrentContext, nil
	}
}

func contextList(cfg *clientcmdapi.Config) string {
	if len(cfg.Contexts) == 0 {
		return "(none)"
	}
	names := make([]string, 0, len(cfg.Contexts))
	for name := range cfg.Contexts {
		names = append(names, name)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// expandHome lets environment files say ~/.kube/other, as people write it.
func expandHome(path string) string {
	if path != "~" && !strings.HasPrefix(path, "~/") {
		return path
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return path
	}
	return filepath.Join(home, strings.TrimPrefix(path, "~"))
}
