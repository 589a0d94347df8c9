package main

import (
	"bytes"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// Corrupt each key of the inventory in turn: every command refuses it and
// names the repair; repair rebuilds it (keeping the old bytes in a backup)
// from the labelled objects and the render, and the next apply prunes
// what the render no longer has.
func TestInventoryRepair(t *testing.T) {
	for _, key := range []string{"metadata", "index", "change"} {
		t.Run(key, func(t *testing.T) {
			ns := env.Namespace(t)
			ctx := t.Context()
			cs := kubernetes.NewForConfigOrDie(env.Config)
			dir := deploytest.Dir(t, ns, ``)
			kc := "--kubeconfig=" + env.Kubeconfig
			code, _, errOut := runOpm(t, "apply", "--no-wait", dir, kc)
			assert.Equal(t, code, 0, errOut)

			list, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: inventory.LabelComponent + "=" + inventory.ComponentInventory})
			assert.NilError(t, err)
			s := &list.Items[0]
			target := key
			if key == "change" {
				for k := range s.Data {
					if k != "metadata" && k != "index" {
						target = k
					}
				}
			}
			s.Data[target] = []byte("{not json")
			s, err = cs.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
			assert.NilError(t, err)
			corrupt := s.Data

			renamed := deploytest.Values(t, `name: "site"`)
			for _, args := range [][]string{{"status", dir}, {"apply", "--no-wait", dir, "-f", renamed}, {"prune", dir}, {"diff", dir}} {
				code, out, errOut := runOpm(t, append(args, kc)...)
				assert.Check(t, code != 0, "%s accepted a corrupt inventory", args[0])
				// The release holds a Secret: its change IDs are sealed
				// in everything opm prints (docs/secrets.md). diff says
				// the error under its release, on stdout.
				said := errOut
				if args[0] == "diff" {
					said = out
				}
				assert.Check(t, is.Contains(said, "data."+sealed(target)), args[0])
				assert.Check(t, is.Contains(said, "opm inventory repair"), args[0])
			}

			code, out, errOut := runOpm(t, "inventory", "repair", dir, "-f", renamed, kc)
			assert.Equal(t, code, 0, errOut)
			assert.Check(t, is.Contains(out, "from 3 rendered and 3 labelled object(s); 3 no longer rendered"))
			backups, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: inventory.LabelComponent + "=" + inventory.ComponentBackup})
			assert.NilError(t, err)
			assert.Equal(t, len(backups.Items), 1)
			assert.Check(t, is.Contains(out, backups.Items[0].Name))
			for k, v := range corrupt {
				assert.Check(t, bytes.Equal(backups.Items[0].Data[k], v), "backup of data.%s", k)
			}

			code, out, errOut = runOpm(t, "apply", "--no-wait", dir, "-f", renamed, kc)
			assert.Equal(t, code, 0, errOut)
			for _, gone := range []string{"deployment.apps/app deleted", "service/app deleted", "secret/app-creds deleted"} {
				assert.Check(t, is.Contains(out, gone))
			}
			assert.Check(t, serviceExists(t, ns, "site"))
			assert.Check(t, !serviceExists(t, ns, "app"))
			code, _, errOut = runOpm(t, "status", dir, "-f", renamed, kc)
			assert.Check(t, code == 1 && !bytes.Contains([]byte(errOut), []byte("corrupt")), errOut)
		})
	}
}
