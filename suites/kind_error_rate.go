package suites

import (
	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
)

// errorRateKind: the share of failed requests over a config's trials of one workload, every
// launch together, is at most the check's max; judged after the config's last launch.
type errorRateKind struct{ configScoped }

func init() { registerConfigKind(errorRateKind{}, spec.KindErrorRate) }

func (errorRateKind) labels(*spec.Check) []string { return []string{labelHealth, labelThroughput} }

// late: failed requests exist only after traffic.
func (errorRateKind) late(*spec.Check) bool { return true }

func (errorRateKind) needs(_ *spec.Spec, c *spec.Check, config string) []need {
	return []need{trialsNeed(config, c.Params.(*spec.ErrorRateParams).Workload)}
}

// judge counts the completed and failed requests of the recorded trials, launch by launch.
func (errorRateKind) judge(ev *evidence, c *spec.Check) gate.Verdict {
	p := c.Params.(*spec.ErrorRateParams)
	if err := ev.measErr[p.Workload]; err != nil {
		return errVerdict(c, ev.name, err)
	}
	trials, launchOf := ev.trials[p.Workload], ev.trialLaunch[p.Workload]
	if len(trials) == 0 {
		if err := ev.infraError(); err != nil {
			return errVerdict(c, ev.name, err)
		}
	}
	var launches []gate.LaunchRequests
	for i, m := range trials {
		l := 1
		if i < len(launchOf) {
			l = launchOf[i]
		}
		if len(launches) == 0 || launches[len(launches)-1].Launch != l {
			launches = append(launches, gate.LaunchRequests{Launch: l})
		}
		lr := &launches[len(launches)-1]
		lr.Trials++
		lr.Completed += m["completed"]
		lr.Failed += m["failed"]
	}
	out := gate.ErrorRate(c.Name, p.Workload, launches, p.Max)
	out.Config = ev.name
	return out // its words: reporters.Sentence, when the entry is recorded
}
