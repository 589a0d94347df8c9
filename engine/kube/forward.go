package kube

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/opmodel/pipeline/engine/fault"
)

// SelfContained reports kubeconfig content that cannot work where its
// files and helper programs are absent (a Dagger function's container):
// exec credential plugins, auth-provider plugins other than oidc, and
// certificate, key or token file paths. The error names the contexts and
// what to inline; it never quotes credentials.
func SelfContained(data []byte) error {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return fault.Validationf("the kubeconfig data is not a valid kubeconfig (%d bytes)", len(data))
	}
	var problems []string
	names := make([]string, 0, len(cfg.Contexts))
	for name := range cfg.Contexts {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		ctx := cfg.Contexts[name]
		if cl := cfg.Clusters[ctx.Cluster]; cl != nil && cl.CertificateAuthority != "" && len(cl.CertificateAuthorityData) == 0 {
			problems = append(problems, fmt.Sprintf("context %q: cluster %q reads its CA from the file %s", name, ctx.Cluster, cl.CertificateAuthority))
		}
		u := cfg.AuthInfos[ctx.AuthInfo]
		if u == nil {
			continue
		}
		switch {
		case u.Exec != nil:
			problems = append(problems, fmt.Sprintf("context %q: user %q gets credentials from the program %q (exec plugin)", name, ctx.AuthInfo, u.Exec.Command))
		case u.AuthProvider != nil && u.AuthProvider.Name != "oidc":
			problems = append(problems, fmt.Sprintf("context %q: user %q gets credentials from the %q auth provider", name, ctx.AuthInfo, u.AuthProvider.Name))
		}
		if u.ClientCertificate != "" && len(u.ClientCertificateData) == 0 {
			problems = append(problems, fmt.Sprintf("context %q: user %q reads its client certificate from the file %s", name, ctx.AuthInfo, u.ClientCertificate))
		}
		if u.ClientKey != "" && len(u.ClientKeyData) == 0 {
			problems = append(problems, fmt.Sprintf("context %q: user %q reads its client key from the file %s", name, ctx.AuthInfo, u.ClientKey))
		}
		if u.TokenFile != "" && u.Token == "" {
			problems = append(problems, fmt.Sprintf("context %q: user %q reads its token from the file %s", name, ctx.AuthInfo, u.TokenFile))
		}
	}
	if len(problems) > 0 {
		return fault.Validationf("the kubeconfig cannot be used inside a container, which has neither its files nor its helper programs:\n  %s\n"+
			"inline the credentials: `kubectl config view --minify --flatten --raw` embeds certificates and keys; for exec or auth-provider users, "+
			"use a ServiceAccount token (kubectl create token) or a client certificate instead",
			strings.Join(problems, "\n  "))
	}
	return nil
}

// PointAt rewrites kubeconfig content so that it reaches its API server at
// endpoint ("host:port"), e.g. a tunnel standing in for the 127.0.0.1
// address a local cluster (kind, minikube, Docker Desktop) writes. TLS
// verification keeps working: each rewritten cluster gets tls-server-name
// set to the host its certificate was issued for (unless it has one).
//
// The clusters rewritten are those whose server port is endpoint's port;
// when none is, a kubeconfig with exactly one cluster has that one
// rewritten. Anything else is ambiguous and an error.
func PointAt(data []byte, endpoint string) ([]byte, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, fault.Validationf("the kubeconfig data is not a valid kubeconfig (%d bytes)", len(data))
	}
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil || host == "" || port == "" {
		return nil, fault.Validationf("API server endpoint %q is not host:port", endpoint)
	}
	type target struct {
		name string
		url  *url.URL
	}
	var byPort, all []target
	names := make([]string, 0, len(cfg.Clusters))
	for name := range cfg.Clusters {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		u, err := url.Parse(cfg.Clusters[name].Server)
		if err != nil || u.Host == "" {
			return nil, fault.Validationf("cluster %q of the kubeconfig has server %q, which is not a URL", name, cfg.Clusters[name].Server)
		}
		t := target{name, u}
		all = append(all, t)
		if serverPort(u) == port {
			byPort = append(byPort, t)
		}
	}
	targets := byPort
	if len(targets) == 0 {
		if len(all) != 1 {
			var servers []string
			for _, t := range all {
				servers = append(servers, fmt.Sprintf("%s (%s)", t.name, t.url.Host))
			}
			return nil, fault.Validationf("the kubeconfig has %d clusters and none has port %s like the API server endpoint %s; clusters: %s. "+
				"Pass a kubeconfig with only the cluster to reach (kubectl config view --minify --flatten --raw), or forward the server's own port",
				len(all), port, endpoint, strings.Join(servers, ", "))
		}
		targets = all
	}
	for _, t := range targets {
		cl := cfg.Clusters[t.name]
		if cl.TLSServerName == "" && !cl.InsecureSkipTLSVerify {
			cl.TLSServerName = t.url.Hostname()
		}
		u := *t.url
		u.Host = net.JoinHostPort(host, port)
		cl.Server = u.String()
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("write the rewritten kubeconfig: %w", err)
	}
	return out, nil
}

func serverPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "http" {
		return "80"
	}
	return "443"
}
