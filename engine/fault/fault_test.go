package fault_test

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"gotest.tools/v3/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opmodel/pipeline/engine/fault"
)

func TestKindOf(t *testing.T) {
	gr := schema.GroupResource{Resource: "secrets"}
	for name, tc := range map[string]struct {
		err  error
		want fault.Kind
	}{
		"nil":                    {nil, 0},
		"plain":                  {errors.New("x"), fault.General},
		"explicit":               {fault.Validationf("bad %s", "input"), fault.Validation},
		"wrapped explicit":       {fmt.Errorf("doing y: %w", fault.Connectivityf("no")), fault.Connectivity},
		"forbidden":              {apierrors.NewForbidden(gr, "s", errors.New("rbac")), fault.Permission},
		"unauthorized":           {apierrors.NewUnauthorized("who"), fault.Permission},
		"not found":              {fmt.Errorf("get: %w", apierrors.NewNotFound(gr, "s")), fault.NotFound},
		"invalid":                {apierrors.NewBadRequest("no"), fault.Validation},
		"network":                {&net.OpError{Op: "dial", Err: errors.New("refused")}, fault.Connectivity},
		"explicit wins over api": {fault.Wrap(fault.Connectivity, apierrors.NewForbidden(gr, "s", errors.New("x"))), fault.Connectivity},
	} {
		t.Run(name, func(t *testing.T) { assert.Equal(t, fault.KindOf(tc.err), tc.want) })
	}
	assert.Equal(t, fault.Permission.ExitCode(), 4)
	assert.Equal(t, fault.Wrap(fault.Validation, nil), nil)
	assert.Equal(t, fault.Validationf("a %d", 1).Error(), "a 1")
}
