package controlplane_test

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
)

// With HOTCERT_SCALE_PROFILE=DIR a scale server process writes DIR/KIND.cpu.pprof
// (from ready until the benchmark measures it: the agents connecting) and
// DIR/KIND.heap.pprof (when it is measured), to see where a connection's cost goes:
//
//	go tool pprof -sample_index=inuse_space -top DIR/cp.heap.pprof
const scaleEnvProfile = "HOTCERT_SCALE_PROFILE"

// scaleProfile is a server process's CPU profile under way, if any.
type scaleProfile struct {
	dir, kind string
	cpu       *os.File
}

func startScaleProfile(t failer, kind string) *scaleProfile {
	p := &scaleProfile{dir: os.Getenv(scaleEnvProfile), kind: kind}
	if p.dir == "" {
		return p
	}
	runtime.MemProfileRate = 1 << 10 // every KiB: a connection's few KiB show
	f, err := os.Create(filepath.Join(p.dir, kind+".cpu.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	p.cpu = f
	return p
}

// stop ends the CPU profile and writes the heap profile (once).
func (p *scaleProfile) stop(t failer) {
	if p.cpu == nil {
		return
	}
	pprof.StopCPUProfile()
	if err := p.cpu.Close(); err != nil {
		t.Error(err)
	}
	p.cpu = nil
	f, err := os.Create(filepath.Join(p.dir, p.kind+".heap.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Error(err)
	}
}
