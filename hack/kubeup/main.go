//go:build unix

// Command kubeup runs a throwaway cluster on loopback for trying the CLI by
// hand: `make kube-up` / `make kube-down`. It is the test suite's cluster
// (internal/kubetest): etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok with simulated nodes (internal/localkube).
//
// Unlike envtest, which stops its processes with the test binary, kubeup
// leaves them running in their own session and records their pids, so the
// cluster outlives the make invocation. Everything lives under <bin>/kube
// and the admin kubeconfig is <bin>/kubeconfig (context opm-local). Every
// process names that directory on its command line, which is how `down`
// also finds processes whose pid file is gone (a failed start).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/opmodel/pipeline/internal/localkube"
)

const contextName = "opm-local"

func main() {
	fs := flag.NewFlagSet("kubeup", flag.ExitOnError)
	bin := fs.String("bin", "bin", "directory holding kube-apiserver and etcd; state goes to <bin>/kube")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: kubeup up|down|status [-bin DIR]")
		fs.PrintDefaults()
	}
	if len(os.Args) < 2 {
		fs.Usage()
		os.Exit(2)
	}
	cmd := os.Args[1]
	_ = fs.Parse(os.Args[2:])

	abs, err := filepath.Abs(*bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeup:", err)
		os.Exit(1)
	}
	p := newPlane(abs)
	ctx := context.Background()
	switch cmd {
	case "up":
		err = p.up(ctx)
	case "down":
		err = p.down()
	case "status":
		err = p.status(ctx)
	default:
		fs.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeup:", err)
		os.Exit(1)
	}
}

// plane is the on-disk layout of one local control plane.
type plane struct {
	bin, dir, pki, kubeconfig string
}

func newPlane(bin string) *plane {
	dir := filepath.Join(bin, "kube")
	return &plane{bin: bin, dir: dir, pki: filepath.Join(dir, "pki"), kubeconfig: filepath.Join(bin, "kubeconfig")}
}

// component is one managed process.
type component struct{ name, binary string }

func (p *plane) etcd() component { return component{"etcd", filepath.Join(p.bin, "etcd")} }
func (p *plane) apiserver() component {
	return component{"kube-apiserver", filepath.Join(p.bin, "kube-apiserver")}
}
func (p *plane) pidFile(c component) string {
	return filepath.Join(p.dir, c.name+".pid")
}

// components are all processes of the plane, in start order.
func (p *plane) components() []component {
	cs := []component{p.etcd(), p.apiserver()}
	for _, name := range localkube.Commands {
		cs = append(cs, component{name, filepath.Join(p.bin, name)})
	}
	return cs
}

func (p *plane) up(ctx context.Context) error {
	started := time.Now()
	if err := p.ready(ctx); err == nil {
		fmt.Printf("Local cluster is already up.\n")
		p.printUsage()
		return nil
	}
	if _, err := os.Stat(p.dir); err == nil || len(p.orphans()) > 0 {
		fmt.Println("Found state of a cluster that is not healthy; starting afresh.")
		if err := p.down(); err != nil {
			return err
		}
	}
	for _, c := range p.components() {
		if err := localkube.CheckExecutable(c.binary); err != nil {
			return fmt.Errorf("%w: run `make kube-bin`", err)
		}
	}
	if err := os.MkdirAll(p.pki, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	pki, err := writePKI(p.pki)
	if err != nil {
		return err
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	server := "https://127.0.0.1:" + strconv.Itoa(ports[2])

	if err := p.start(p.etcd(),
		"--name=kubeup",
		"--data-dir="+filepath.Join(p.dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=kubeup="+peerURL,
	); err != nil {
		return err
	}
	if err := waitFor(ctx, 30*time.Second, p.etcd(), p, func(ctx context.Context) error {
		return httpOK(ctx, http.DefaultClient, etcdURL+"/health")
	}); err != nil {
		return errors.Join(err, p.down())
	}

	// Flags as envtest sets them, plus client-certificate auth with our CA.
	if err := p.start(p.apiserver(),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports[2]),
		"--cert-dir="+p.pki,
		"--tls-cert-file="+pki.servingCert,
		"--tls-private-key-file="+pki.servingKey,
		"--client-ca-file="+pki.caCert,
		"--authorization-mode=RBAC",
		"--service-account-issuer="+server,
		"--service-account-key-file="+pki.saPublic,
		"--service-account-signing-key-file="+pki.saPrivate,
		"--service-cluster-ip-range="+localkube.ServiceCIDR,
		"--feature-gates="+localkube.APIServerFeatureGates,
		"--allow-privileged=true",
	); err != nil {
		return errors.Join(err, p.down())
	}

	kc := kubeconfig(server, pki)
	if err := clientcmd.WriteToFile(*kc, p.kubeconfig); err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", p.kubeconfig, err), p.down())
	}
	// The controllers get their own copy inside the state directory, so
	// their command lines name it too.
	controllersKubeconfig := filepath.Join(p.dir, "admin.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, controllersKubeconfig); err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", controllersKubeconfig, err), p.down())
	}
	if err := waitFor(ctx, 2*time.Minute, p.apiserver(), p, p.apiserverReady); err != nil {
		return errors.Join(err, p.down())
	}
	if err := p.startControllers(ctx, controllersKubeconfig, pki); err != nil {
		return errors.Join(err, p.down())
	}
	fmt.Printf("Local cluster is up at %s with %d simulated nodes (%.1fs).\n", server, localkube.Nodes, time.Since(started).Seconds())
	p.printUsage()
	return nil
}

// startControllers runs the controller-manager, scheduler and kwok,
// registers the simulated nodes and waits until they are Ready.
func (p *plane) startControllers(ctx context.Context, kubeconfig string, pki *pkiFiles) error {
	procs, err := localkube.Processes(localkube.Config{Bin: p.bin, Dir: p.dir, Kubeconfig: kubeconfig, ServiceAccountKey: pki.saPrivate})
	if err != nil {
		return err
	}
	for _, proc := range procs {
		if err := p.start(component{proc.Name, proc.Path}, proc.Args...); err != nil {
			return err
		}
	}
	cs, err := p.client()
	if err != nil {
		return err
	}
	if err := localkube.CreateNodes(ctx, cs); err != nil {
		return err
	}
	alive := func() error {
		for _, proc := range procs {
			if _, err := p.running(component{proc.Name, proc.Path}); err != nil {
				return fmt.Errorf("%s exited while starting (%v):\n%s", proc.Name, err, tail(filepath.Join(p.dir, proc.Name+".log"), 20))
			}
		}
		return nil
	}
	return localkube.WaitReady(ctx, cs, 2*time.Minute, alive)
}

func (p *plane) printUsage() {
	rel := p.kubeconfig
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, p.kubeconfig); err == nil && !strings.HasPrefix(r, "..") {
			rel = r
		}
	}
	fmt.Printf(`  kubectl --kubeconfig %s get ns
  export KUBECONFIG=%s   # context %s
  make kube-down         # stop it and delete its state (logs: %s/*.log)
`, rel, p.kubeconfig, contextName, p.dir)
}

// ready says whether every process runs and the API server answers
// through the kubeconfig that users get, so "up" means that file works.
func (p *plane) ready(ctx context.Context) error {
	for _, c := range p.components() {
		if _, err := p.running(c); err != nil {
			return err
		}
	}
	return p.apiserverReady(ctx)
}

// apiserverReady checks /readyz through the users' kubeconfig.
func (p *plane) apiserverReady(ctx context.Context) error {
	cs, err := p.client()
	if err != nil {
		return err
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("/readyz: %w", err)
	}
	if string(body) != "ok" {
		return fmt.Errorf("/readyz answered %q", body)
	}
	return nil
}

func (p *plane) client() (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p.kubeconfig, err)
	}
	cfg.Timeout = 5 * time.Second
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	return cs, nil
}

func (p *plane) status(ctx context.Context) error {
	if err := p.ready(ctx); err != nil {
		return fmt.Errorf("local cluster is not up: %w", err)
	}
	fmt.Println("Local cluster is up.")
	p.printUsage()
	return nil
}

// start launches c detached from this process (own session, output to a
// log file) so that it keeps running after kubeup and make exit.
func (p *plane) start(c component, args ...string) error {
	logPath := filepath.Join(p.dir, c.name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open %s log: %w", c.name, err)
	}
	defer log.Close()
	cmd := exec.Command(c.binary, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", c.name, err)
	}
	pid := cmd.Process.Pid
	// Not waited for: the process is meant to outlive us.
	_ = cmd.Process.Release()
	if err := os.WriteFile(p.pidFile(c), []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return fmt.Errorf("record %s pid: %w", c.name, err)
	}
	return nil
}

// running returns the pid of c if its pid file names a live process of the
// right binary; a reused pid must never be signalled.
func (p *plane) running(c component) (int, error) {
	raw, err := os.ReadFile(p.pidFile(c))
	if err != nil {
		return 0, fmt.Errorf("%s is not running (no pid file)", c.name)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: bad pid file %s", c.name, p.pidFile(c))
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return 0, fmt.Errorf("%s (pid %d) is not running", c.name, pid)
	}
	if state, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && zombie(string(state)) {
		return 0, fmt.Errorf("%s (pid %d) has exited", c.name, pid)
	}
	// A live process with an empty command line (one in the middle of
	// exec) cannot be told apart, so only a named other binary is refused.
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && len(cmdline) > 0 {
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		if filepath.Base(argv0) != c.name {
			return 0, fmt.Errorf("pid %d is %s, not %s", pid, argv0, c.name)
		}
	}
	return pid, nil
}

// zombie reads the state field of /proc/PID/stat ("pid (comm) S ...").
func zombie(stat string) bool {
	i := strings.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// down stops every process of the plane in reverse start order, then any
// other process that still names the state directory on its command line
// (one whose pid file a failed start never wrote or already removed), and
// removes all state.
func (p *plane) down() error {
	stopped := false
	cs := p.components()
	for i := len(cs) - 1; i >= 0; i-- {
		c := cs[i]
		pid, err := p.running(c)
		if err != nil {
			continue
		}
		if err := terminate(pid); err != nil {
			return fmt.Errorf("stop %s (pid %d): %w", c.name, pid, err)
		}
		fmt.Printf("Stopped %s (pid %d).\n", c.name, pid)
		stopped = true
	}
	for _, o := range p.orphans() {
		if err := terminate(o.pid); err != nil {
			return fmt.Errorf("stop %s (pid %d): %w", o.name, o.pid, err)
		}
		fmt.Printf("Stopped %s (pid %d), found by its state directory.\n", o.name, o.pid)
		stopped = true
	}
	if !stopped {
		fmt.Println("No local cluster was running.")
	}
	if err := os.RemoveAll(p.dir); err != nil {
		return fmt.Errorf("remove state: %w", err)
	}
	if err := os.Remove(p.kubeconfig); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove kubeconfig: %w", err)
	}
	return nil
}

type orphan struct {
	pid  int
	name string
}

// orphans lists live processes running one of the plane's binaries with an
// argument inside the state directory. Both conditions must hold, so no
// unrelated process (an editor with a log open) is ever signalled.
func (p *plane) orphans() []orphan {
	names := map[string]bool{}
	for _, c := range p.components() {
		names[c.name] = true
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	prefix := p.dir + string(filepath.Separator)
	var out []orphan
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		name := filepath.Base(argv[0])
		if !names[name] || !alive(pid) {
			continue
		}
		for _, a := range argv[1:] {
			if strings.Contains(a, prefix) || strings.HasSuffix(a, "="+p.dir) {
				out = append(out, orphan{pid, name})
				break
			}
		}
	}
	return out
}

// terminate asks politely, then insists after 15s.
func terminate(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return err
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// alive is false once the process is gone or a zombie awaiting its parent.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err != nil || !zombie(string(stat))
}

// waitFor polls check until it succeeds, the timeout passes or c dies; on
// failure it includes the end of c's log, which says why.
func waitFor(ctx context.Context, timeout time.Duration, c component, p *plane, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if _, err := p.running(c); err != nil {
			return fmt.Errorf("%s exited while starting (%v):\n%s", c.name, err, tail(filepath.Join(p.dir, c.name+".log"), 20))
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %w\n%s", c.name, timeout, last, tail(filepath.Join(p.dir, c.name+".log"), 20))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func httpOK(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// freePorts asks the kernel for n distinct free loopback ports. They are
// released before use, so a race is possible but unlikely on a dev box.
func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func kubeconfig(server string, pki *pkiFiles) *clientcmdapi.Config {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[contextName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: pki.caPEM}
	kc.AuthInfos["opm-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: pki.adminCertPEM, ClientKeyData: pki.adminKeyPEM}
	kc.Contexts[contextName] = &clientcmdapi.Context{Cluster: contextName, AuthInfo: "opm-admin"}
	kc.CurrentContext = contextName
	return kc
}
