package rollout

import (
	"fmt"
	"time"

	"github.com/opmodel/pipeline/engine/health"
)

// Narration tells say, while a health wait lasts, each object whose
// health changes and how far each release is: "blog: 3 of 5 objects
// healthy; deployment.apps/web: InProgress (…)". The zero Narration says
// nothing.
type Narration struct {
	say func(string)
	// totals are the objects of each release, by name.
	totals map[string]int
	// start is when the wait began: each line says how long it has run,
	// so a reason (ImagePullBackOff) is seen as soon as it appears.
	start time.Time
}

// Narrate starts a narration now; totals are the objects of each
// release, by name (a release not in it is narrated without a count).
func Narrate(say func(string), totals map[string]int) Narration {
	return Narration{say: say, totals: totals, start: time.Now()}
}

// Progress is a health wait's callback for n, or nil when nobody
// listens. An object is reported when it is not Current at first and
// whenever its health changes, so the healthy are the total less those
// last reported otherwise. The caller calls it under one lock.
func (n Narration) Progress() func(release string, h health.ObjectHealth) {
	if n.say == nil {
		return nil
	}
	pending := map[string]map[string]bool{}
	return func(release string, h health.ObjectHealth) {
		p := pending[release]
		if p == nil {
			p = map[string]bool{}
			pending[release] = p
		}
		if h.Status == health.Current {
			delete(p, h.Ref())
		} else {
			p[h.Ref()] = true
		}
		at := time.Since(n.start).Round(time.Second)
		if total, ok := n.totals[release]; ok && total > 0 {
			n.say(fmt.Sprintf("%s: %d of %d objects healthy after %s; %s", release, max(total-len(p), 0), total, at, h))
			return
		}
		n.say(fmt.Sprintf("%s: after %s, %s", release, at, h))
	}
}
