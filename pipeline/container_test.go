package pipeline_test

import (
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/opmodel/pipeline/pipeline"
)

func TestContainerKubeconfig(t *testing.T) {
	const kind = `apiVersion: v1
kind: Config
clusters:
- name: kind-opm
  cluster: {server: "https://127.0.0.1:39211", certificate-authority-data: "Y2E="}
contexts:
- name: kind-opm
  context: {cluster: kind-opm, user: kind-opm}
users:
- name: kind-opm
  user: {client-certificate-data: "Y2VydA==", client-key-data: "a2V5"}
current-context: kind-opm
`
	same, err := pipeline.ContainerKubeconfig([]byte(kind), "")
	assert.NilError(t, err)
	assert.Equal(t, string(same), kind, "without a server the content is used as given")

	out, err := pipeline.ContainerKubeconfig([]byte(kind), "tunnel.dagger.local:39211")
	assert.NilError(t, err)
	cfg, err := clientcmd.Load(out)
	assert.NilError(t, err)
	assert.Equal(t, cfg.Clusters["kind-opm"].Server, "https://tunnel.dagger.local:39211")
	assert.Equal(t, cfg.Clusters["kind-opm"].TLSServerName, "127.0.0.1")

	const gke = `apiVersion: v1
kind: Config
clusters:
- name: gke
  cluster: {server: "https://34.1.2.3", certificate-authority-data: "Y2E="}
contexts:
- name: gke
  context: {cluster: gke, user: gke}
users:
- name: gke
  user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: gke-gcloud-auth-plugin}}
current-context: gke
`
	_, err = pipeline.ContainerKubeconfig([]byte(gke), "tunnel.dagger.local:443")
	assert.Check(t, is.ErrorContains(err, `"gke-gcloud-auth-plugin" (exec plugin)`))
	assert.Check(t, is.ErrorContains(err, "inline the credentials"))
}
