// Command ssa is the benchmark's second peer: it applies, re-applies and
// diffs a multi-document YAML file with github.com/fluxcd/pkg/ssa's
// ResourceManager — the engine Flux and Timoni apply with — at the request
// rate and concurrency opm uses. It lives in a module of its own because
// that package needs newer Kubernetes libraries than opm's go.mod pins;
// `make bench` builds it. It prints one line of counts, for the benchmark
// to check.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/pkg/ssa"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	file := flag.String("f", "", "multi-document YAML of the objects")
	mode := flag.String("mode", "apply", "apply or diff")
	concurrency := flag.Int("concurrency", 8, "concurrent requests (opm's objects.DefaultConcurrency)")
	qps := flag.Float64("qps", 1000, "client QPS (opm's default)")
	burst := flag.Int("burst", 2000, "client burst (opm's default)")
	flag.Parse()
	if err := run(context.Background(), *kubeconfig, *file, *mode, *concurrency, float32(*qps), *burst); err != nil {
		fmt.Fprintln(os.Stderr, "ssa:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, file, mode string, concurrency int, qps float32, burst int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = qps, burst
	objs, err := readObjects(file)
	if err != nil {
		return err
	}
	rm, err := manager(cfg, concurrency)
	if err != nil {
		return err
	}
	switch mode {
	case "apply":
		opts := ssa.DefaultApplyOptions()
		opts.Force = true
		opts.WaitTimeout = time.Minute
		cs, err := rm.ApplyAllStaged(ctx, objs, opts)
		if err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		counts := map[ssa.Action]int{}
		for _, e := range cs.Entries {
			counts[e.Action]++
		}
		fmt.Printf("%d created, %d configured, %d unchanged\n", counts[ssa.CreatedAction], counts[ssa.ConfiguredAction], counts[ssa.UnchangedAction])
	case "diff":
		// Diff is per object; run it as concurrently as opm's diff does.
		var mu sync.Mutex
		drifted := 0
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(concurrency)
		for _, o := range objs {
			g.Go(func() error {
				e, _, _, err := rm.Diff(gctx, o, ssa.DefaultDiffOptions())
				if err != nil {
					return fmt.Errorf("diff %s/%s: %w", o.GetKind(), o.GetName(), err)
				}
				if e.Action != ssa.UnchangedAction {
					mu.Lock()
					drifted++
					mu.Unlock()
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		fmt.Printf("%d drifted, %d unchanged\n", drifted, len(objs)-drifted)
	default:
		return fmt.Errorf("unknown mode %q: want apply or diff", mode)
	}
	return nil
}

func manager(cfg *rest.Config, concurrency int) (*ssa.ResourceManager, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Mapper: mapper, HTTPClient: httpClient})
	if err != nil {
		return nil, err
	}
	poller := polling.NewStatusPoller(c, mapper, polling.Options{})
	rm := ssa.NewResourceManager(c, poller, ssa.Owner{Field: "ssa-bench", Group: "bench.opmodel.dev"})
	rm.SetConcurrency(concurrency)
	return rm, nil
}

func readObjects(file string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}
