package pipeline

import "github.com/opmodel/pipeline/engine/kube"

// ContainerKubeconfig prepares kubeconfig content for a container that has
// none of the kubeconfig's files or helper programs and cannot reach the
// host's loopback (a Dagger function): it refuses exec plugins and file
// paths with an error saying what to inline, and, when server
// ("host:port", e.g. a Dagger service standing in for kind's 127.0.0.1
// address) is set, points the matching cluster at it with TLS verification
// kept (tls-server-name).
func ContainerKubeconfig(data []byte, server string) ([]byte, error) {
	if err := kube.SelfContained(data); err != nil {
		return nil, err
	}
	if server == "" {
		return data, nil
	}
	return kube.PointAt(data, server)
}
