// Package controlplane starts a real, throw-away Kubernetes control plane
// (etcd, kube-apiserver and kube-controller-manager as child processes, all
// on 127.0.0.1) for end-to-end tests.
//
// The binaries come from hack/controlplane/build.sh, which builds them from
// k8s.io/kubernetes once and prints the directory that holds them;
// hack/e2e.sh exports that directory as HANDOFF_CONTROLPLANE_BIN. Tests that
// use this package belong behind the "e2e" build tag so that a plain
// `go test ./...` starts nothing.
//
// Typical use, one control plane per test binary:
//
//	var cp *controlplane.ControlPlane
//
//	func TestMain(m *testing.M) {
//		var err error
//		cp, err = controlplane.Start(context.Background(), controlplane.Options{CRDs: crds})
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		code := m.Run()
//		cp.Stop()
//		os.Exit(code)
//	}
//
// or, per test, `cp, err := controlplane.Start(ctx, opts)` followed by
// `t.Cleanup(cp.Stop)`. Always arrange for Stop: it terminates the children
// and removes the work dir. On Linux the children additionally get
// Pdeathsig=SIGKILL, so they die with the test binary even if it is killed
// (for example by `go test -timeout`) before Stop runs; the work dir such a
// run leaves in $TMPDIR is removed by a later Start.
//
// The controller-manager runs only the garbagecollector, namespace,
// deployment and replicaset controllers. There is no scheduler and no
// kubelet: pods are never scheduled, so a Deployment with replicas > 0 never
// becomes Available, while one with replicas: 0 does.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// EnvBinDir names the environment variable that Start reads when
// Options.BinDir is empty.
const EnvBinDir = "HANDOFF_CONTROLPLANE_BIN"

// EnvKeepWorkDir, when set to a non-empty value, makes Stop keep the work
// dir (certificates, data and logs), like Options.KeepWorkDir.
const EnvKeepWorkDir = "HANDOFF_CONTROLPLANE_KEEP_WORKDIR"

// Names of the binaries expected in the bin dir; each one's output goes to
// <name>.log in the work dir.
const (
	Etcd              = "etcd"
	KubeAPIServer     = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
)

// Controllers are the controllers kube-controller-manager runs.
const Controllers = "garbagecollector,namespace,deployment,replicaset"

// gcSyncedMessage is what kube-controller-manager logs once the garbage
// collector's informers for every discovered resource have synced.
const (
	gcSyncedMessage    = "all resource monitors have synced"
	gcNotSyncedMessage = "not all resource monitors could be synced"
)

const (
	defaultStartTimeout = 2 * time.Minute
	clientQPS           = 200
	clientBurst         = 400
	pollInterval        = 100 * time.Millisecond
	startAttempts       = 3
)

// Options configure Start.
type Options struct {
	// BinDir holds the etcd, kube-apiserver and kube-controller-manager
	// binaries. Empty means the value of $HANDOFF_CONTROLPLANE_BIN.
	BinDir string

	// CRDs are CustomResourceDefinition manifests (apiextensions.k8s.io/v1)
	// in YAML or JSON; one element may hold several YAML documents
	// separated by "---". They are created after the API server is ready,
	// and Start waits until each is Established, each served version can be
	// listed and its resource appears in discovery, all before the
	// controller-manager starts, so the garbage collector knows them from
	// its first discovery (it would otherwise pick up a new CRD only at its
	// next 30 s resync). Start also waits out the 2-3 s after Established
	// during which the API server holds every create of an instance for
	// 2 s, so the first create in a test is not slowed down.
	CRDs [][]byte

	// StartTimeout bounds the whole of Start (on top of ctx).
	// Zero means 2 minutes.
	StartTimeout time.Duration

	// KeepWorkDir makes Stop leave the work dir (logs, certificates, etcd
	// data) in place, for debugging. Also set by $HANDOFF_CONTROLPLANE_KEEP_WORKDIR.
	KeepWorkDir bool

	// Logf, if set, receives progress messages (for example t.Logf).
	Logf func(format string, args ...any)
}

// ControlPlane is a running etcd, kube-apiserver and
// kube-controller-manager. Its methods are safe for concurrent use.
type ControlPlane struct {
	workDir     string
	keepWorkDir bool
	apiURL      string
	kubeconfig  string
	ca          *authority
	admin       keyPair

	procs []*process // in start order: etcd, kube-apiserver, kube-controller-manager

	stopOnce sync.Once
}

// Start starts a control plane and returns once it is fully usable: the
// API server is ready, the "default" namespace exists, Options.CRDs are
// servable, the controller-manager is healthy and its garbage collector has
// synced. ctx bounds only the start; the processes run until Stop (or until
// the test binary exits). On error everything started is stopped again and
// the error names the failing process and quotes the tail of its log.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	if opts.BinDir == "" {
		opts.BinDir = os.Getenv(EnvBinDir)
	}
	if opts.BinDir == "" {
		return nil, fmt.Errorf("controlplane: no binaries: set Options.BinDir or $%s (hack/controlplane/build.sh prints the directory)", EnvBinDir)
	}
	for _, b := range []string{Etcd, KubeAPIServer, ControllerManager} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			return nil, fmt.Errorf("controlplane: %s binary missing in %s (run hack/controlplane/build.sh): %w", b, opts.BinDir, err)
		}
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = defaultStartTimeout
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if os.Getenv(EnvKeepWorkDir) != "" {
		opts.KeepWorkDir = true
	}
	crds, err := decodeCRDs(opts.CRDs)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}

	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	// Free ports are picked by binding and releasing them, so another
	// process may grab one in between: retry on "address already in use".
	for attempt := 1; ; attempt++ {
		cp, err := start(ctx, opts, crds)
		if err == nil {
			return cp, nil
		}
		if attempt >= startAttempts || !strings.Contains(err.Error(), "address already in use") || ctx.Err() != nil {
			return nil, err
		}
		opts.Logf("controlplane: port clash, retrying: %v", firstLine(err.Error()))
	}
}

func start(ctx context.Context, opts Options, crds []crd) (_ *ControlPlane, err error) {
	began := time.Now()
	sweepStaleWorkDirs()
	workDir, err := os.MkdirTemp("", workDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("controlplane: work dir: %w", err)
	}
	cp := &ControlPlane{workDir: workDir, keepWorkDir: opts.KeepWorkDir}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	if err := writeOwner(workDir); err != nil {
		return nil, fmt.Errorf("controlplane: work dir: %w", err)
	}

	if err := cp.writePKI(); err != nil {
		return nil, fmt.Errorf("controlplane: PKI: %w", err)
	}
	ports, err := freePorts(4)
	if err != nil {
		return nil, fmt.Errorf("controlplane: free ports: %w", err)
	}
	etcdClient, etcdPeer, apiPort, kcmPort := ports[0], ports[1], ports[2], ports[3]
	cp.apiURL = "https://127.0.0.1:" + strconv.Itoa(apiPort)
	if err := cp.writeKubeconfig(); err != nil {
		return nil, fmt.Errorf("controlplane: kubeconfig: %w", err)
	}
	file := func(name string) string { return filepath.Join(workDir, name) }

	// etcd.
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	etcd, err := cp.run(opts, Etcd, []string{
		"--name=default",
		"--data-dir=" + file("etcd-data"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--unsafe-no-fsync",
		// A single member elects itself after one election timeout; the
		// default (1 s) is most of etcd's start time.
		"--heartbeat-interval=20",
		"--election-timeout=200",
		"--log-level=warn",
	})
	if err != nil {
		return nil, err
	}
	httpClient := &http.Client{Timeout: 2 * time.Second}
	if err := waitFor(ctx, etcd, "health", func(ctx context.Context) error {
		return httpOK(ctx, httpClient, etcdURL+"/health", `"health":"true"`)
	}); err != nil {
		return nil, err
	}
	opts.Logf("controlplane: etcd healthy after %v", time.Since(began).Round(time.Millisecond))

	// kube-apiserver.
	apiserver, err := cp.run(opts, KubeAPIServer, []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + file("apiserver-certs"),
		"--tls-cert-file=" + file("apiserver.crt"),
		"--tls-private-key-file=" + file("apiserver.key"),
		"--client-ca-file=" + file("ca.crt"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + file("sa.pub"),
		"--service-account-signing-key-file=" + file("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none",
		"--disable-admission-plugins=ServiceAccount",
		"--profiling=false",
	})
	if err != nil {
		return nil, err
	}
	adminHTTP, err := rest.HTTPClientFor(cp.Config())
	if err != nil {
		return nil, fmt.Errorf("controlplane: http client: %w", err)
	}
	adminHTTP.Timeout = 5 * time.Second
	if err := waitFor(ctx, apiserver, "/readyz", func(ctx context.Context) error {
		return httpOK(ctx, adminHTTP, cp.apiURL+"/readyz", "ok")
	}); err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cp.Config())
	if err != nil {
		return nil, fmt.Errorf("controlplane: dynamic client: %w", err)
	}
	namespaces := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	if err := waitFor(ctx, apiserver, `namespace "default"`, func(ctx context.Context) error {
		_, err := dyn.Resource(namespaces).Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	opts.Logf("controlplane: kube-apiserver ready after %v", time.Since(began).Round(time.Millisecond))

	var crdsSettled time.Time
	if len(crds) > 0 {
		if crdsSettled, err = cp.installCRDs(ctx, apiserver, crds); err != nil {
			return nil, err
		}
		opts.Logf("controlplane: %d CRD(s) servable after %v", len(crds), time.Since(began).Round(time.Millisecond))
	}

	// kube-controller-manager, after the CRDs so that the garbage
	// collector's first discovery includes them.
	kcm, err := cp.run(opts, ControllerManager, []string{
		"--kubeconfig=" + cp.kubeconfig,
		"--controllers=" + Controllers,
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(kcmPort),
		"--cert-dir=" + file("kcm-certs"),
		"--tls-cert-file=" + file("kcm.crt"),
		"--tls-private-key-file=" + file("kcm.key"),
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--profiling=false",
	})
	if err != nil {
		return nil, err
	}
	kcmClient, err := cp.tlsClient()
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	kcmURL := "https://127.0.0.1:" + strconv.Itoa(kcmPort)
	if err := waitFor(ctx, kcm, "/healthz", func(ctx context.Context) error {
		return httpOK(ctx, kcmClient, kcmURL+"/healthz", "ok")
	}); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, kcm, "garbage collector sync", func(ctx context.Context) error {
		if kcm.logContains(gcSyncedMessage) {
			return nil
		}
		if kcm.logContains(gcNotSyncedMessage) {
			return errPermanent{errors.New("garbage collector: " + gcNotSyncedMessage)}
		}
		return fmt.Errorf("log does not say %q yet", gcSyncedMessage)
	}); err != nil {
		return nil, err
	}
	// Let the API server's post-Established create delay pass, so that a
	// test's first create of a custom resource is not held for 2 s.
	if wait := time.Until(crdsSettled.Add(100 * time.Millisecond)); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, fmt.Errorf("controlplane: timed out waiting for the CRDs to settle: %w", context.Cause(ctx))
		}
	}
	opts.Logf("controlplane: started in %v (work dir %s)", time.Since(began).Round(time.Millisecond), workDir)
	return cp, nil
}

// Config returns a new rest.Config for an admin identity (group
// system:masters, which bypasses RBAC), with QPS 200 and Burst 400. The
// caller may modify it.
func (cp *ControlPlane) Config() *rest.Config {
	return cp.configFor(cp.admin)
}

// Kubeconfig returns the path of a kubeconfig file for the admin identity.
// It lives in the work dir and is removed by Stop.
func (cp *ControlPlane) Kubeconfig() string { return cp.kubeconfig }

// UserConfig returns a rest.Config that authenticates with a fresh client
// certificate, signed by the control plane's CA, for user and groups. Such
// a user has only what RBAC grants it (the defaults give an authenticated
// user discovery and little else), so tests can check which permissions
// the code needs.
func (cp *ControlPlane) UserConfig(user string, groups ...string) (*rest.Config, error) {
	if user == "" {
		return nil, errors.New("controlplane: UserConfig: empty user name")
	}
	pair, err := cp.ca.clientPair(user, groups)
	if err != nil {
		return nil, fmt.Errorf("controlplane: UserConfig: %w", err)
	}
	return cp.configFor(pair), nil
}

// Host returns the API server's URL (https://127.0.0.1:<port>).
func (cp *ControlPlane) Host() string { return cp.apiURL }

// WorkDir returns the directory that holds the certificates, the etcd data
// and the logs etcd.log, kube-apiserver.log and kube-controller-manager.log.
func (cp *ControlPlane) WorkDir() string { return cp.workDir }

// LogTail returns about the last n bytes of the log of component (Etcd,
// KubeAPIServer or ControllerManager), for failure messages. It works until
// Stop removes the work dir.
func (cp *ControlPlane) LogTail(component string, n int) string {
	return tail(filepath.Join(cp.workDir, component+".log"), int64(n))
}

// Stop stops the processes that Start started (by their PIDs: SIGTERM, and
// SIGKILL after 5 s), waits for them and removes the work dir unless it is
// kept. It is idempotent and safe to call from t.Cleanup or TestMain.
func (cp *ControlPlane) Stop() {
	if cp == nil {
		return
	}
	cp.stopOnce.Do(func() {
		// The controller-manager first, so it does not act on a
		// half-stopped API server; etcd last.
		for i := len(cp.procs) - 1; i >= 0; i-- {
			cp.procs[i].stop()
		}
		if !cp.keepWorkDir && cp.workDir != "" {
			_ = os.RemoveAll(cp.workDir)
		}
	})
}

func (cp *ControlPlane) run(opts Options, name string, args []string) (*process, error) {
	p, err := startProcess(name, filepath.Join(opts.BinDir, name), filepath.Join(cp.workDir, name+".log"), args)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	cp.procs = append(cp.procs, p)
	return p, nil
}

// errPermanent stops waitFor at once.
type errPermanent struct{ error }

// waitFor polls check until it returns nil. It fails early, with the log
// tail, if p exits or check returns errPermanent, and on ctx's end.
func waitFor(ctx context.Context, p *process, what string, check func(context.Context) error) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var last error
	for {
		if exited, how := p.exited(); exited {
			return fmt.Errorf("controlplane: %w", p.errorf("exited while waiting for %s: %v", what, how))
		}
		last = check(ctx)
		if last == nil {
			return nil
		}
		var perm errPermanent
		if errors.As(last, &perm) {
			return fmt.Errorf("controlplane: %w", p.errorf("waiting for %s: %v", what, perm.error))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("controlplane: %w", p.errorf("timed out waiting for %s (%v); last error: %v", what, context.Cause(ctx), last))
		case <-ticker.C:
		}
	}
}

// httpOK checks that GET url answers 200 with a body containing want.
func httpOK(ctx context.Context, client *http.Client, url, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	body := string(data)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, want) {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(body))
	}
	return nil
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
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
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
