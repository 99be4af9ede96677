package main

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// barView draws a job on a terminal: the stage on a line of its own, and
// a progress bar per workload of updated replicas against desired ones.
// Its texts are atomic values, so mpb's render goroutines read them
// without a lock that update could hold while it waits on mpb.
type barView struct {
	p     *mpb.Progress
	stage atomic.Pointer[string]
	head  *mpb.Bar
	bars  map[string]*workloadBar // only update and close touch it
}

type workloadBar struct {
	bar  *mpb.Bar
	text atomic.Pointer[string]
}

func newBarView(ctx context.Context, w io.Writer, id string) *barView {
	v := &barView{p: mpb.NewWithContext(ctx, mpb.WithOutput(w), mpb.WithWidth(32)), bars: map[string]*workloadBar{}}
	v.stage.Store(ptrTo("waiting for the first report"))
	v.head = v.p.New(0, mpb.NopStyle(), mpb.PrependDecorators(decor.Any(func(decor.Statistics) string {
		return fmt.Sprintf("job %s: %s", id, *v.stage.Load())
	})))
	return v
}

func (v *barView) update(u *fluxdv1.WatchJobResponse) {
	j := u.GetJob()
	stage := j.GetStage()
	if p := j.GetQueuePosition(); p > 0 {
		stage += fmt.Sprintf(" (position %d in the queue)", p)
	}
	v.stage.Store(&stage)
	for _, wp := range u.GetWorkloads() {
		r := wp.GetReplicas()
		wb, ok := v.bars[wp.GetService()]
		if !ok {
			wb = &workloadBar{}
			wb.text.Store(ptrTo(""))
			wb.bar = v.p.AddBar(int64(r.GetDesired()),
				mpb.PrependDecorators(decor.Name(wp.GetService(), decor.WCSyncSpaceR)),
				mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return *wb.text.Load() })))
			v.bars[wp.GetService()] = wb
		}
		wb.text.Store(ptrTo(fmt.Sprintf("%d/%d updated, %d ready, %d available", r.GetUpdated(), r.GetDesired(), r.GetReady(), r.GetAvailable())))
		wb.bar.SetTotal(int64(r.GetDesired()), false)
		wb.bar.SetCurrent(int64(r.GetUpdated()))
	}
}

// close completes every bar, so the last frame stays on the screen.
func (v *barView) close() {
	for _, wb := range v.bars {
		wb.bar.SetTotal(-1, true)
	}
	v.head.SetTotal(-1, true)
	v.p.Wait()
}

func ptrTo(s string) *string { return &s }
