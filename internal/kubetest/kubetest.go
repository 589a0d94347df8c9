// Package kubetest is the shared test harness for packages that need a real
// Kubernetes API server.
//
// A package starts one Env in TestMain and gives each test its own namespace:
//
//	var env *kubetest.Env
//
//	func TestMain(m *testing.M) {
//		var err error
//		if env, err = kubetest.Start(); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		code := m.Run()
//		if err := env.Stop(); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//		}
//		os.Exit(code)
//	}
//
// By default Start runs a whole local cluster: etcd and kube-apiserver
// through envtest, then kube-controller-manager, kube-scheduler and kwok
// with simulated nodes (internal/localkube), so Deployments roll out, Jobs
// complete, namespaces finish terminating and dependents are garbage
// collected as on a user's cluster. The binaries come from
// KUBEBUILDER_ASSETS (a relative path counts from the module root) or else
// from <module root>/bin, where `make kube-bin` puts them. Missing binaries
// are an error, never a skip: a test suite that silently skips its cluster
// tests proves nothing.
//
// With OPM_TEST_EXISTING_CLUSTER=1 the same tests run against the cluster
// that the default kubeconfig loading rules (KUBECONFIG, ~/.kube/config)
// select, for example a kind cluster, where a real kubelet replaces kwok.
// Images: ReadyImage becomes Ready and JobImage completes on both;
// FailingImage never pulls on either.
//
// A test that must write object status by hand (a state the controllers
// pass through too quickly to observe) uses Env.WithoutControllers.
package kubetest

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/opmodel/pipeline/internal/localkube"
)

const (
	// ExistingClusterEnv switches Start to the cluster of the current kubeconfig.
	ExistingClusterEnv = "OPM_TEST_EXISTING_CLUSTER"
	// ContextName is the context of the kubeconfig file that Env writes.
	ContextName = "opm-test"
	// NamespaceLabel marks namespaces created by Env.Namespace, so leftovers
	// on a long-lived cluster can be found and removed.
	NamespaceLabel = "opmodel.dev/kubetest"

	// ReadyImage is an image whose pods become Running and Ready, on the
	// simulated nodes and on a real node alike, and stay so. The kind job
	// loads it and JobImage into its node beforehand.
	ReadyImage = "registry.k8s.io/pause:3.10"
	// JobImage runs a Job's pod to completion on a real node with the
	// command ["true"]; on the simulated nodes every Job pod completes.
	JobImage = "busybox:1.36"
	// FailingImage never pulls: a real kubelet cannot resolve its registry,
	// and the simulated nodes report ImagePullBackOff for it.
	FailingImage = localkube.FailingRegistry + "/opm-test/app:1.0"

	adminUser = "opm-admin"
	// Tests create many objects quickly; client-go's default 5/10 would
	// throttle them for no benefit against a private API server.
	qps   = 200
	burst = 400
)

// Env is a running (or borrowed) API server and the ways to reach it.
type Env struct {
	// Config reaches the cluster as an administrator.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for the same cluster and
	// credentials, with current context ContextName, for CLI-level tests.
	Kubeconfig string

	env         *envtest.Environment
	dir         string
	clientset   kubernetes.Interface
	controllers []*process // nil for an existing cluster and WithoutControllers
	existing    bool

	bareOnce sync.Once
	bare     *Env
	bareErr  error
}

// Start brings up the test cluster, or connects to the existing one when
// OPM_TEST_EXISTING_CLUSTER=1. The caller must Stop it.
func Start() (*Env, error) {
	if os.Getenv(ExistingClusterEnv) == "1" {
		return start(true, false)
	}
	return start(false, true)
}

func start(existing, controllers bool) (*Env, error) {
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		return nil, fmt.Errorf("create kubetest temp dir: %w", err)
	}
	e := &Env{dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), existing: existing}

	var kubeconfig []byte
	var assets string
	if existing {
		e.Config, kubeconfig, err = existingCluster()
	} else {
		assets, err = assetsDir()
		if err == nil {
			e.Config, kubeconfig, err = e.startEnvtest(assets, controllers)
		}
	}
	if err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	if err := os.WriteFile(e.Kubeconfig, kubeconfig, 0o600); err != nil {
		return nil, errors.Join(fmt.Errorf("write test kubeconfig: %w", err), e.Stop())
	}
	if e.clientset, err = kubernetes.NewForConfig(e.Config); err != nil {
		return nil, errors.Join(fmt.Errorf("build test clientset: %w", err), e.Stop())
	}
	if !existing && controllers {
		if err := e.startControllers(assets); err != nil {
			return nil, errors.Join(err, e.Stop())
		}
	}
	return e, nil
}

// startEnvtest runs etcd and kube-apiserver and provisions the admin user.
// Either way its Service range is localkube.ServiceCIDR; with controllers
// the ServiceAccount admission plugin is on, as on any cluster (envtest
// turns it off because nothing would create default ServiceAccounts).
func (e *Env) startEnvtest(assets string, controllers bool) (*rest.Config, []byte, error) {
	apiserver := filepath.Join(assets, "kube-apiserver")
	etcd := filepath.Join(assets, "etcd")
	bins := []string{apiserver, etcd}
	if controllers {
		for _, name := range localkube.Commands {
			bins = append(bins, filepath.Join(assets, name))
		}
	}
	for _, bin := range bins {
		if err := localkube.CheckExecutable(bin); err != nil {
			return nil, nil, fmt.Errorf("test control plane: %w; run `make kube-bin` (or set KUBEBUILDER_ASSETS, or %s=1 to use the current kubeconfig's cluster)", err, ExistingClusterEnv)
		}
	}

	useExisting := false
	e.env = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		UseExistingCluster:    &useExisting,
		// Two cores run several test binaries at once; the default 20s can
		// be too tight for etcd plus a cold API server.
		ControlPlaneStartTimeout: time.Minute,
	}
	// Explicit paths, so TEST_ASSET_* variables cannot pick other binaries
	// than the ones checked above.
	e.env.ControlPlane.GetAPIServer().Path = apiserver
	args := e.env.ControlPlane.GetAPIServer().Configure()
	args.Set("service-cluster-ip-range", localkube.ServiceCIDR)
	args.Set("feature-gates", localkube.APIServerFeatureGates)
	if controllers {
		args.Disable("disable-admission-plugins")
	}
	e.env.ControlPlane.Etcd = &envtest.Etcd{Path: etcd}
	if _, err := e.env.Start(); err != nil {
		return nil, nil, fmt.Errorf("start envtest control plane from %s: %w", assets, err)
	}

	user, err := e.env.AddUser(envtest.User{Name: adminUser, Groups: []string{"system:masters"}}, &rest.Config{QPS: qps, Burst: burst})
	if err != nil {
		return nil, nil, fmt.Errorf("provision test admin user: %w", err)
	}
	raw, err := user.KubeConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("render test admin kubeconfig: %w", err)
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("parse envtest kubeconfig: %w", err)
	}
	kubeconfig, err := renameCurrentContext(kc)
	if err != nil {
		return nil, nil, err
	}
	return rest.CopyConfig(user.Config()), kubeconfig, nil
}

// existingCluster loads the current kubeconfig context and writes a
// self-contained copy of it (certificates inlined) for CLI-level tests.
func existingCluster() (*rest.Config, []byte, error) {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("%s=1: load kubeconfig: %w", ExistingClusterEnv, err)
	}
	cfg.QPS, cfg.Burst = qps, burst

	raw, err := cc.RawConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("%s=1: read kubeconfig: %w", ExistingClusterEnv, err)
	}
	if err := clientcmdapi.MinifyConfig(&raw); err != nil {
		return nil, nil, fmt.Errorf("%s=1: reduce kubeconfig to its current context: %w", ExistingClusterEnv, err)
	}
	if err := clientcmdapi.FlattenConfig(&raw); err != nil {
		return nil, nil, fmt.Errorf("%s=1: inline kubeconfig certificates: %w", ExistingClusterEnv, err)
	}
	kubeconfig, err := renameCurrentContext(&raw)
	if err != nil {
		return nil, nil, err
	}
	return cfg, kubeconfig, nil
}

// renameCurrentContext makes ContextName the current context, so tests can
// name it regardless of where the cluster came from.
func renameCurrentContext(kc *clientcmdapi.Config) ([]byte, error) {
	cur, ok := kc.Contexts[kc.CurrentContext]
	if !ok {
		return nil, fmt.Errorf("test kubeconfig: current context %q is not defined", kc.CurrentContext)
	}
	delete(kc.Contexts, kc.CurrentContext)
	kc.Contexts[ContextName] = cur
	kc.CurrentContext = ContextName
	out, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("serialise test kubeconfig: %w", err)
	}
	return out, nil
}

// startControllers runs the controller-manager, scheduler and kwok next
// to envtest's API server and waits until they work.
func (e *Env) startControllers(assets string) error {
	procs, err := localkube.Processes(localkube.Config{
		Bin: assets, Dir: e.dir, Kubeconfig: e.Kubeconfig,
		// envtest generates the API server's token key pair into its
		// certificate directory; the controller-manager signs with the
		// private half.
		ServiceAccountKey: filepath.Join(e.env.ControlPlane.APIServer.CertDir, "sa-signer.key"),
	})
	if err != nil {
		return fmt.Errorf("test control plane: %w", err)
	}
	for _, p := range procs {
		proc, err := startProcess(p, filepath.Join(e.dir, p.Name+".log"))
		if err != nil {
			return err
		}
		e.controllers = append(e.controllers, proc)
	}
	ctx := context.Background()
	if err := localkube.CreateNodes(ctx, e.clientset); err != nil {
		return err
	}
	alive := func() error {
		for _, p := range e.controllers {
			if err := p.exited(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := localkube.WaitReady(ctx, e.clientset, 2*time.Minute, alive); err != nil {
		var logs strings.Builder
		for _, p := range e.controllers {
			fmt.Fprintf(&logs, "\n--- %s (end of log) ---\n%s", p.name, p.tail(15))
		}
		return fmt.Errorf("test control plane: %w%s", err, logs.String())
	}
	return nil
}

// process is a controller running as a child of the test binary.
type process struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
	err       error // valid once done is closed
}

func startProcess(p localkube.Process, logPath string) (*process, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create %s log: %w", p.Name, err)
	}
	defer log.Close()
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Stdout, cmd.Stderr = log, log
	// A test binary killed by `go test -timeout` or a signal cannot run
	// Stop; the kernel then stops the controllers with it (Linux).
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", p.Name, err)
	}
	proc := &process{name: p.Name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		proc.err = cmd.Wait()
		close(proc.done)
	}()
	return proc, nil
}

// exited reports a process that is no longer running.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited while starting (%v)", p.name, p.err)
	default:
		return nil
	}
}

func (p *process) tail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stop asks the process to end and kills it after 10s.
func (p *process) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return nil
}

// Stop stops the control plane (when Start started one) and removes the
// kubeconfig file.
func (e *Env) Stop() error {
	var errs []error
	if e.bare != nil {
		if err := e.bare.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	// Controllers first: they would log errors for every second the API
	// server is gone.
	for _, p := range e.controllers {
		if err := p.stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if e.env != nil {
		if err := e.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop envtest control plane: %w", err))
		}
	}
	if err := os.RemoveAll(e.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove kubetest temp dir: %w", err))
	}
	return errors.Join(errs...)
}

// Namespace creates a namespace named after the test, unique across runs,
// and deletes it when the test ends (not awaited: the namespace controller
// finishes it). Where controllers run, it returns once the namespace's
// default ServiceAccount exists, as pods cannot be created before.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	name, err := namespaceName(t.Name())
	if err != nil {
		t.Fatalf("namespace name: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{NamespaceLabel: "true"},
	}}
	if _, err := e.clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create test namespace %s: %v", name, err)
	}
	if e.Controllers() {
		for {
			_, err := e.clientset.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
			if err == nil {
				break
			}
			if !apierrors.IsNotFound(err) || ctx.Err() != nil {
				t.Fatalf("test namespace %s: no default ServiceAccount: %v", name, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Cleanup(func() {
		// t.Context() is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := e.clientset.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete test namespace %s: %v", name, err)
		}
	})
	return name
}

const suffixLen = 5

// namespaceName turns a test name into a DNS-1123 label (≤63 chars) with a
// random suffix, so reruns against an existing cluster never collide with
// namespaces still terminating from the last run.
func namespaceName(testName string) (string, error) {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(testName) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	base := b.String()
	if limit := 63 - 1 - suffixLen; len(base) > limit {
		base = base[:limit]
	}
	base = strings.Trim(base, "-")
	if base == "" {
		base = "test"
	}

	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	suffix := make([]byte, suffixLen)
	for i := range suffix {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return "", fmt.Errorf("random suffix: %w", err)
		}
		suffix[i] = alphabet[n.Int64()]
	}
	return base + "-" + string(suffix), nil
}

// assetsDir is KUBEBUILDER_ASSETS, else bin/ at the root of this module.
// go test runs each package in its own directory, so a relative
// KUBEBUILDER_ASSETS (KUBEBUILDER_ASSETS=bin) is taken from the module root.
func assetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if filepath.IsAbs(dir) {
		return dir, nil
	}
	if dir == "" {
		dir = "bin"
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, dir), nil
}

func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("locate module root: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("locate module root: no go.mod above %s; set KUBEBUILDER_ASSETS to an absolute path", wd)
		}
	}
}

// Main is a test package's TestMain: it starts the control plane into
// *env, runs the tests, stops it and exits. A control plane that does not
// start fails the package (never a skip); one that does not stop cleanly
// fails it too.
//
//	var env *kubetest.Env
//	func TestMain(m *testing.M) { kubetest.Main(m, &env) }
//
// A fuzzing worker (go test -fuzz starts them) gets no control plane and
// *env stays nil: it runs only the fuzz target, and none of this
// project's needs a cluster. Started there, the control plane outlived
// the worker when -fuzztime ended, and held the worker's output open, so
// go test never returned.
func Main(m *testing.M, env **Env) {
	if fuzzWorker() {
		os.Exit(m.Run())
	}
	e, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// fuzzWorker reports whether this test binary is a go test -fuzz worker
// (testing's -test.fuzzworker flag, parsed here as m.Run would).
func fuzzWorker() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.fuzzworker")
	return f != nil && f.Value.String() == "true"
}

// Controllers reports whether controllers run on the cluster: true for the
// default local cluster and an existing one, false for WithoutControllers.
func (e *Env) Controllers() bool { return e.existing || e.controllers != nil }

// WithoutControllers returns a second control plane of the package, etcd
// and kube-apiserver only, started on first use and stopped with e. It is
// for the few tests that write object status by hand to reach a state the
// controllers pass through too quickly to observe (a rollout the
// controller has not seen yet); on the default cluster the controllers
// would overwrite that status at once. On an existing cluster there is no
// such plane, and t is skipped saying so.
func (e *Env) WithoutControllers(t testing.TB) *Env {
	t.Helper()
	if e.existing {
		t.Skip("writes object status by hand, which needs a control plane without controllers; only the local cluster of make test has one")
	}
	e.bareOnce.Do(func() { e.bare, e.bareErr = start(false, false) })
	if e.bareErr != nil {
		t.Fatalf("start a control plane without controllers: %v", e.bareErr)
	}
	return e.bare
}

// RequireNoControllers skips t on a cluster whose controllers would
// overwrite the status the test writes by hand — since the local cluster
// runs controllers too, that is every cluster. Kept so that older tests
// still build; use WithoutControllers instead, which runs them.
func (e *Env) RequireNoControllers(t testing.TB) {
	t.Helper()
	if e.Controllers() {
		t.Skip("writes object status by hand, which this cluster's controllers would overwrite; use Env.WithoutControllers")
	}
}

// WaitForPodReason waits, up to a minute, until a container of a pod in
// ns is waiting for reason (the simulated nodes report ImagePullBackOff
// for FailingImage), and fails t when none does: tests that assert what
// a wait reports first wait for the condition it reports.
func WaitForPodReason(t testing.TB, cs kubernetes.Interface, ns, reason string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err == nil {
			for _, p := range pods.Items {
				for _, c := range p.Status.ContainerStatuses {
					if w := c.State.Waiting; w != nil && w.Reason == reason {
						return
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pod in %s reported %s within a minute (last list error: %v)", ns, reason, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// CanI asks the API server whether user (with groups) may verb the
// resource: the question kubectl auth can-i --as asks.
func CanI(t testing.TB, cs kubernetes.Interface, user string, groups []string, verb, group, resource, ns, name string) bool {
	t.Helper()
	sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: ns, Name: name},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("asking whether %s may %s %s: %v", user, verb, resource, err)
	}
	return sar.Status.Allowed
}

// WaitUntilAllowed waits until the API server lets user verb the
// resource: its RBAC authorizer learns of bindings through a watch, so a
// test that just created them asks until they count before acting as user.
func WaitUntilAllowed(t testing.TB, cs kubernetes.Interface, user string, groups []string, verb, group, resource, ns, name string) {
	t.Helper()
	WaitFor(t, 30*time.Second, func() error {
		if CanI(t, cs, user, groups, verb, group, resource, ns, name) {
			return nil
		}
		return fmt.Errorf("%s may not %s %s in %q yet", user, verb, resource, ns)
	})
}

// WaitFor polls cond until it returns nil, and fails t with its last error
// once timeout has passed: a condition, never a fixed sleep (the API
// server's authorizer, for one, learns of new RBAC bindings a moment later).
func WaitFor(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
