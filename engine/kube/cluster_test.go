package kube

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/internal/kubetest"
)

var testEnv *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &testEnv) }

func TestConnectToRealCluster(t *testing.T) {
	isolate(t, "")
	file, err := os.ReadFile(testEnv.Kubeconfig)
	assert.NilError(t, err)

	for name, sel := range map[string]Flags{
		"file": {Kubeconfig: testEnv.Kubeconfig},
		"data": {KubeconfigData: file},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := Connect(t.Context(), sel, EnvCluster{Name: "test", KubeContext: kubetest.ContextName}, Options{})
			assert.NilError(t, err)
			assert.Equal(t, c.Context, kubetest.ContextName)
			assert.Equal(t, c.Server, strings.TrimSuffix(testEnv.Config.Host, "/"))
			assert.NilError(t, c.Ping(t.Context()))
		})
	}
}

func TestRESTMapperPluralisesFromDiscovery(t *testing.T) {
	c, err := FromConfig(testEnv.Config, "test", Options{})
	assert.NilError(t, err)

	// Kind+"s" gets Ingress and NetworkPolicy wrong; discovery does not.
	for _, tc := range []struct {
		gk   schema.GroupKind
		want schema.GroupVersionResource
	}{
		{schema.GroupKind{Group: "apps", Kind: "Deployment"}, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}},
		{schema.GroupKind{Group: "networking.k8s.io", Kind: "Ingress"}, schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}},
		{schema.GroupKind{Group: "networking.k8s.io", Kind: "NetworkPolicy"}, schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}},
		{schema.GroupKind{Kind: "ConfigMap"}, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}},
	} {
		m, err := c.Mapper.RESTMapping(tc.gk)
		assert.NilError(t, err, tc.gk.String())
		assert.Check(t, is.Equal(m.Resource, tc.want))
	}

	_, err = c.Mapper.RESTMapping(schema.GroupKind{Group: "example.com", Kind: "Widget"})
	assert.Check(t, err != nil, "an unknown kind mapped")
}

func TestPingRejectedCredentials(t *testing.T) {
	cfg := &rest.Config{
		Host:            testEnv.Config.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: testEnv.Config.CAData},
		BearerToken:     "not-a-valid-token",
	}
	c, err := FromConfig(cfg, "bad-creds", Options{})
	assert.NilError(t, err)

	err = c.Ping(t.Context())
	assert.Check(t, is.ErrorContains(err, "context bad-creds ("+strings.TrimSuffix(testEnv.Config.Host, "/")+")"))
	assert.Check(t, !strings.Contains(fmt.Sprint(err), "not-a-valid-token"), "error quotes the token: %v", err)
	assert.Check(t, is.Equal(fault.KindOf(err), fault.Permission))
}
