package rollout

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/opmodel/pipeline/engine/fleet"
)

// waveOK reports whether every environment of a wave was applied.
func waveOK[R AppliedRelease, S any](res *Result[R, S], idx []int) bool {
	for _, i := range idx {
		if res.Environments[i].Result != Applied {
			return false
		}
	}
	return true
}

// waveSoak is the longest rollout.soak of a wave's environments.
func waveSoak(wave []fleet.Environment) time.Duration {
	var d time.Duration
	for _, e := range wave {
		d = max(d, e.Soak)
	}
	return d
}

// soakWave keeps checking a healthy wave for soak, as Kargo verifies a
// stage before promoting further: every environment must stay healthy
// throughout and at the end, or it is marked unhealthy with what broke.
func soakWave[R AppliedRelease, S any](ctx context.Context, steps Steps[R, S], opts Options, res *Result[R, S], idx []int, soak time.Duration, lastWave bool) {
	interval := min(max(soak/6, time.Second), 10*time.Second)
	if opts.SoakInterval > 0 {
		interval = opts.SoakInterval
	}
	start := time.Now()
	deadline := start.Add(soak)
	names := make([]string, 0, len(idx))
	for _, i := range idx {
		names = append(names, res.Environments[i].Name)
	}
	who := "environment " + strings.Join(names, ", ")
	until := "before the next wave"
	if lastWave {
		until = "before the rollout ends"
	}
	opts.narrate("%s: healthy; soaking for %s (rollout.soak) %s, checked every %s", who, soak, until, interval)
	for {
		last := !time.Now().Before(deadline)
		if !last {
			timer := time.NewTimer(min(interval, time.Until(deadline)))
			select {
			case <-ctx.Done():
				timer.Stop()
				for _, i := range idx {
					res.Environments[i].Result, res.Environments[i].Error = Unhealthy, "soak interrupted: "+ctx.Err().Error()
				}
				return
			case <-timer.C:
			}
		}
		broken := false
		for _, i := range idx {
			e := &res.Environments[i]
			why := steps.Unhealthy(ctx, e.FleetEnvironment)
			if why == "" {
				continue
			}
			e.Result = Unhealthy
			e.Error = fmt.Sprintf("became unhealthy %s into its %s soak: %s", time.Since(start).Truncate(time.Second), soak, why)
			broken = true
		}
		if broken || last {
			return
		}
		opts.narrate("%s: healthy, %s of its %s soak left", who, max(time.Until(deadline).Round(time.Second), 0), soak)
		if opts.SoakProbe != nil {
			opts.SoakProbe()
		}
	}
}
