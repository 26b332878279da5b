// clock.go holds the set-up of the modelled device clock (--clock modelled): the timer, its
// pacer, and the launch index its noise is drawn for.

package server

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/reckon-ci/reckon/refengine/device"
	"github.com/reckon-ci/reckon/refengine/sched"
)

// setupDeviceClock builds the modelled device clock (--clock modelled): the GPU, the modelled
// model and its allreduces, and the pacer with its launch's noise.
func (e *Engine) setupDeviceClock(s *startup) error {
	opts := e.Opts
	n := opts.TPSize
	custom, forced := s.custom, s.forced
	gpu, err := device.LookupGPU(opts.ModelledGPU)
	if err != nil {
		return fmt.Errorf("%w: --modelled-gpu: %w", errUsage, err)
	}
	vm, err := device.LookupModel(opts.ModelledModel)
	if err != nil {
		return fmt.Errorf("%w: --modelled-model: %w", errUsage, err)
	}
	s.vm = vm
	// The modelled model's allreduces: the same selection, at its message sizes.
	mc := device.Comm{Interconnect: e.Interconnect, Custom: custom, NCCL: e.NCCLAlgorithm}
	if custom {
		mc.CustomMaxBytes = customARMaxBytes
		if forced {
			mc.CustomMaxBytes = s.largest * int64(vm.Hidden) * int64(vm.ActBytes)
		}
	}
	e.Device = &device.Timer{GPU: gpu, Model: vm, TP: n, Comm: mc}
	if opts.ModelledMemory {
		if opts.DeviceMemoryDefault {
			opts.DeviceMemory = gpu.MemoryBytes
		}
		if custom {
			s.customARBytes = 3 * customARMaxBytes
			if forced {
				s.customARBytes = mc.CustomMaxBytes * 2 * int64(n)
			}
		}
	}
	launch, err := launchIndex(opts)
	if err != nil {
		return err
	}
	e.Launch = launch
	e.Pacer = device.NewPacer(device.WallClock{}, opts.FaultSlowdown, opts.noise(launch))
	e.Pacer.CatchUp = opts.ClockCatchUp
	s.sg.Info("%s", e.Device.Describe())
	return nil
}

// deviceClock is the scheduler's device clock, nil on the wall clock.
func (e *Engine) deviceClock() *sched.DeviceClock {
	if e.Device == nil {
		return nil
	}
	return &sched.DeviceClock{Timer: *e.Device, Pacer: e.Pacer}
}

// launchIndex is the device clock's launch index: --clock-launch, else the next number of
// --clock-launch-counter's file (which it advances, under an exclusive lock, so that the launches
// of one run draw 0, 1, 2, ... in launch order), else 0.
func launchIndex(o *Options) (uint64, error) {
	if o.ClockLaunch >= 0 {
		return uint64(o.ClockLaunch), nil
	}
	if o.ClockLaunchCounter == "" {
		return 0, nil
	}
	f, err := os.OpenFile(o.ClockLaunchCounter, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, fmt.Errorf("--clock-launch-counter: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return 0, fmt.Errorf("--clock-launch-counter %s: lock: %w", o.ClockLaunchCounter, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	data, err := io.ReadAll(f)
	if err != nil {
		return 0, fmt.Errorf("--clock-launch-counter %s: %w", o.ClockLaunchCounter, err)
	}
	var n uint64
	if t := strings.TrimSpace(string(data)); t != "" {
		if n, err = strconv.ParseUint(t, 10, 64); err != nil {
			return 0, fmt.Errorf("--clock-launch-counter %s: %q is not a launch index: %w", o.ClockLaunchCounter, t, err)
		}
	}
	if err := f.Truncate(0); err != nil {
		return 0, fmt.Errorf("--clock-launch-counter %s: %w", o.ClockLaunchCounter, err)
	}
	if _, err := f.WriteAt([]byte(strconv.FormatUint(n+1, 10)+"\n"), 0); err != nil {
		return 0, fmt.Errorf("--clock-launch-counter %s: %w", o.ClockLaunchCounter, err)
	}
	return n, nil
}
