// Package localkube turns a bare kube-apiserver on this machine into a
// cluster that behaves like a user's: it describes how to run
// kube-controller-manager, kube-scheduler and kwok (simulated nodes and pod
// lifecycles, since no kubelet or container engine runs here), registers
// the simulated nodes and waits until they all work.
//
// Both front ends of the local control plane use it: hack/kubeup
// (`make kube-up`, processes that outlive make) and internal/kubetest
// (processes that live as long as one test binary). Each starts the
// processes its own way; the flags, kwok's stages and the readiness rule
// live here once.
//
// What the simulated nodes do with pods (kwok stages written to kwok.yaml):
// a pod whose image comes from FailingRegistry never pulls (ImagePullBackOff,
// as a real kubelet reports for an unresolvable registry); any other pod
// becomes Running and Ready at once; a Job's pod then completes with exit
// code 0; a deleted pod is removed.
package localkube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	// ServiceCIDR is the Service range to give kube-apiserver
	// (--service-cluster-ip-range): 65 534 addresses, where a /24 ran out
	// at about 250 Services.
	ServiceCIDR = "10.96.0.0/16"
	// PodCIDR is where kwok takes pod IPs from; it must not overlap
	// ServiceCIDR.
	PodCIDR = "10.244.0.0/16"
	// Nodes is how many simulated nodes are registered.
	Nodes = 3
	// NodeLeaseSeconds is the duration of the simulated nodes' Leases,
	// a kubelet's default; kwok renews them every quarter of it.
	NodeLeaseSeconds = 40
	// NodeLabel marks the simulated nodes (value "kwok").
	NodeLabel = "opmodel.dev/node"
	// APIServerFeatureGates must be given to kube-apiserver
	// (--feature-gates). With WatchList on, kube-apiserver v1.34 answers a
	// watch from resourceVersion 0 with an error unless etcd supports
	// progress notifications, which Debian's etcd 3.4 does not; kwok's
	// informers then relist with back-off and pods wait seconds for their
	// status. Plain LIST+WATCH, as before WatchList, has no such need.
	// hack/etcd's 3.6 supports them; the gate stays until the suite has
	// run with WatchList on.
	APIServerFeatureGates = "WatchList=false"
	// FailingRegistry is a registry host that never resolves (.invalid is
	// reserved): a real kubelet cannot pull from it, and kwok's stage
	// makes simulated nodes report the same ImagePullBackOff.
	FailingRegistry = "registry.invalid"
)

// Commands names the binaries of the controllers, as found in the bin
// directory next to kube-apiserver and etcd.
var Commands = []string{"kube-controller-manager", "kube-scheduler", "kwok"}

// Config is what the controllers need to reach the API server.
type Config struct {
	// Bin holds the binaries named by Commands.
	Bin string
	// Dir is a private directory for kwok's configuration.
	Dir string
	// Kubeconfig is an administrator's kubeconfig file for the API server.
	Kubeconfig string
	// ServiceAccountKey is the PEM private key matching the API server's
	// --service-account-key-file, with which the controller-manager signs
	// ServiceAccount token Secrets.
	ServiceAccountKey string
}

// Process is one program to run: its name, binary and arguments.
type Process struct {
	Name, Path string
	Args       []string
}

// Processes returns the controller-manager, scheduler and kwok to run for
// c, after writing kwok's configuration into c.Dir. None of them serves a
// port: tests run several control planes side by side.
func Processes(c Config) ([]Process, error) {
	for _, name := range Commands {
		if err := CheckExecutable(filepath.Join(c.Bin, name)); err != nil {
			return nil, err
		}
	}
	kwokConfig := filepath.Join(c.Dir, "kwok.yaml")
	if err := os.WriteFile(kwokConfig, []byte(kwokStages), 0o600); err != nil {
		return nil, fmt.Errorf("write kwok configuration: %w", err)
	}
	return []Process{
		{Name: "kube-controller-manager", Path: filepath.Join(c.Bin, "kube-controller-manager"), Args: []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--service-account-private-key-file=" + c.ServiceAccountKey,
			"--leader-elect=false",
			"--secure-port=0",
			// The garbage collector and namespace controller delete whole
			// releases at once; the default 20 QPS would make prune tests
			// wait on the client-side rate limiter.
			"--kube-api-qps=200",
			"--kube-api-burst=400",
		}},
		{Name: "kube-scheduler", Path: filepath.Join(c.Bin, "kube-scheduler"), Args: []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--leader-elect=false",
			"--secure-port=0",
			"--kube-api-qps=200",
			"--kube-api-burst=400",
		}},
		{Name: "kwok", Path: filepath.Join(c.Bin, "kwok"), Args: []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--config=" + kwokConfig,
			"--manage-nodes-with-label-selector=" + NodeLabel + "=kwok",
			"--cidr=" + PodCIDR,
			// Renew each node's Lease in kube-node-lease, as a kubelet does
			// (every quarter of the duration). Without it the node
			// lifecycle controller marks every node NotReady once its
			// grace period runs out, the node-ready stage makes it Ready
			// again, and health waits and gates read "unhealthy" about
			// every minute.
			"--node-lease-duration-seconds=" + strconv.Itoa(NodeLeaseSeconds),
		}},
	}, nil
}

// CreateNodes registers the simulated nodes (kwok-0, kwok-1, …), which
// kwok then keeps Ready. Nodes that exist already are kept.
func CreateNodes(ctx context.Context, cs kubernetes.Interface) error {
	for i := range Nodes {
		name := "kwok-" + strconv.Itoa(i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: name,
				Labels: map[string]string{
					NodeLabel:                "kwok",
					"kubernetes.io/hostname": name,
					"kubernetes.io/os":       "linux",
					"kubernetes.io/arch":     "amd64",
				},
				Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
			},
		}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("register simulated node %s: %w", name, err)
		}
	}
	return nil
}

// WaitReady waits until every simulated node is Ready (kwok runs) and the
// default ServiceAccount exists (the controller-manager runs). alive, when
// not nil, is asked on every round whether the processes still run, so a
// crashed one fails at once instead of at the timeout.
func WaitReady(ctx context.Context, cs kubernetes.Interface, timeout time.Duration, alive func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		last := ready(ctx, cs)
		if last == nil {
			return nil
		}
		if alive != nil {
			if err := alive(); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("controllers not ready after %s: %w", timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func ready(ctx context.Context, cs kubernetes.Interface) error {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: NodeLabel + "=kwok"})
	if err != nil {
		return fmt.Errorf("list simulated nodes: %w", err)
	}
	readyNodes := 0
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				readyNodes++
			}
		}
	}
	if readyNodes < Nodes {
		return fmt.Errorf("%d of %d simulated nodes are Ready (kwok)", readyNodes, Nodes)
	}
	if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
		return fmt.Errorf("no default ServiceAccount yet (kube-controller-manager): %w", err)
	}
	return nil
}

// CheckExecutable says, naming the file, why path cannot be run.
func CheckExecutable(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s is missing", path)
	}
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}
