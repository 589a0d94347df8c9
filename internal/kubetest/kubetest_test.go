package kubetest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var env *Env

func TestMain(m *testing.M) {
	var err error
	if env, err = Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// TestConfigAndKubeconfigReachSameCluster writes through Env.Config and
// reads back through the kubeconfig file, as a CLI under test would.
func TestConfigAndKubeconfigReachSameCluster(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)

	cs, err := kubernetes.NewForConfig(env.Config)
	assert.NilError(t, err)
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Data:       map[string]string{"written-by": "rest.Config"},
	}, metav1.CreateOptions{})
	assert.NilError(t, err)

	kc, err := clientcmd.LoadFromFile(env.Kubeconfig)
	assert.NilError(t, err)
	assert.Equal(t, kc.CurrentContext, ContextName)

	fileCfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	assert.NilError(t, err)
	fileCS, err := kubernetes.NewForConfig(fileCfg)
	assert.NilError(t, err)
	got, err := fileCS.CoreV1().ConfigMaps(ns).Get(ctx, "probe", metav1.GetOptions{})
	assert.NilError(t, err)
	assert.DeepEqual(t, got.Data, map[string]string{"written-by": "rest.Config"})

	// The file's credentials must be an administrator's, not merely valid.
	_, err = fileCS.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	assert.NilError(t, err)
}

func TestNamespaceIsCreatedLabelledAndDeleted(t *testing.T) {
	cs, err := kubernetes.NewForConfig(env.Config)
	assert.NilError(t, err)

	var name string
	t.Run("inner", func(t *testing.T) {
		name = env.Namespace(t)
		ns, err := cs.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
		assert.NilError(t, err)
		assert.Equal(t, ns.Labels[NamespaceLabel], "true")
		assert.Assert(t, ns.DeletionTimestamp == nil)
	})

	// After the subtest's cleanup the namespace is terminating, and the
	// namespace controller then removes it.
	ns, err := cs.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
	if err == nil {
		assert.Assert(t, ns.DeletionTimestamp != nil, "namespace %s was not deleted", name)
	}
	deadline := time.Now().Add(time.Minute)
	for !apierrors.IsNotFound(err) {
		assert.Assert(t, time.Now().Before(deadline), "namespace %s still there after a minute: %v", name, err)
		time.Sleep(100 * time.Millisecond)
		_, err = cs.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
	}
}

// The controller-manager signs ServiceAccount tokens with the key that
// matches the API server's, publishes the cluster CA into every namespace,
// and the nodes are Ready.
func TestControllersRun(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	assert.NilError(t, err)

	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
	assert.NilError(t, err)
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "robot-token", Annotations: map[string]string{corev1.ServiceAccountNameKey: "robot"}},
		Type:       corev1.SecretTypeServiceAccountToken,
	}, metav1.CreateOptions{})
	assert.NilError(t, err)

	deadline := time.Now().Add(time.Minute)
	var token []byte
	for len(token) == 0 {
		assert.Assert(t, time.Now().Before(deadline), "the token controller never filled robot-token")
		time.Sleep(100 * time.Millisecond)
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, "robot-token", metav1.GetOptions{})
		assert.NilError(t, err)
		token = s.Data[corev1.ServiceAccountTokenKey]
	}
	// The API server accepts the token: it was signed with its key.
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = string(token)
	robot, err := kubernetes.NewForConfig(cfg)
	assert.NilError(t, err)
	review, err := robot.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	assert.NilError(t, err)
	assert.Equal(t, review.Status.UserInfo.Username, "system:serviceaccount:"+ns+":robot")

	_, err = cs.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	assert.NilError(t, err, "the root CA publisher runs")

	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	assert.NilError(t, err)
	ready := 0
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	assert.Assert(t, ready > 0, "no Ready node")
}

// The plane for hand-written status has no controllers: nothing creates
// a namespace's default ServiceAccount there.
func TestWithoutControllers(t *testing.T) {
	bare := env.WithoutControllers(t)
	assert.Check(t, !bare.Controllers())
	assert.Check(t, env.Controllers())
	assert.Check(t, bare.Config.Host != env.Config.Host, "a second API server")
	ns := bare.Namespace(t)
	cs, err := kubernetes.NewForConfig(bare.Config)
	assert.NilError(t, err)
	// The plane with controllers creates the default ServiceAccount of a
	// namespace made after this one; once it has, the bare plane's would
	// have been created too, were anything there to create it.
	ctl := env.Namespace(t)
	full, err := kubernetes.NewForConfig(env.Config)
	assert.NilError(t, err)
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := full.CoreV1().ServiceAccounts(ctl).Get(t.Context(), "default", metav1.GetOptions{})
		if err == nil {
			break
		}
		assert.Assert(t, apierrors.IsNotFound(err) && time.Now().Before(deadline), "the controlled plane made no default ServiceAccount: %v", err)
		time.Sleep(100 * time.Millisecond)
	}
	_, err = cs.CoreV1().ServiceAccounts(ns).Get(t.Context(), "default", metav1.GetOptions{})
	assert.Check(t, apierrors.IsNotFound(err), "got %v", err)
}

func TestNamespaceName(t *testing.T) {
	label := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	for _, tc := range []struct{ in, prefix string }{
		{"TestApply/Some_Case#01", "testapply-some-case-01-"},
		{"Test__x__", "test-x-"},
		{"///", "test-"},
		{strings.Repeat("A", 100), strings.Repeat("a", 57) + "-"},
		{strings.Repeat("a", 56) + "/b", strings.Repeat("a", 56) + "-"},
	} {
		got, err := namespaceName(tc.in)
		assert.NilError(t, err)
		assert.Check(t, len(got) <= 63, "%q is %d chars", got, len(got))
		assert.Check(t, is.Regexp(label, got))
		assert.Check(t, strings.HasPrefix(got, tc.prefix), "%q lacks prefix %q", got, tc.prefix)
		assert.Check(t, is.Len(got, len(tc.prefix)+suffixLen))
	}

	a, err := namespaceName("TestSame")
	assert.NilError(t, err)
	b, err := namespaceName("TestSame")
	assert.NilError(t, err)
	assert.Check(t, a != b, "two calls gave the same name %q", a)
}

func TestStartFailsWithoutBinaries(t *testing.T) {
	t.Setenv(ExistingClusterEnv, "")
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
	e, err := Start()
	if err == nil {
		_ = e.Stop()
	}
	assert.ErrorContains(t, err, "make kube-bin")
}

func TestAssetsDir(t *testing.T) {
	root, err := moduleRoot()
	assert.NilError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	assert.NilError(t, err)

	for _, tc := range []struct{ env, want string }{
		{"", filepath.Join(root, "bin")},
		{"bin", filepath.Join(root, "bin")},
		{"/opt/k8s", "/opt/k8s"},
	} {
		t.Setenv("KUBEBUILDER_ASSETS", tc.env)
		got, err := assetsDir()
		assert.NilError(t, err)
		assert.Check(t, is.Equal(got, tc.want), "KUBEBUILDER_ASSETS=%q", tc.env)
	}
}
