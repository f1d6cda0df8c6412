package detect

import (
	"container/heap"
	"sort"
)

// decode turns the class heatmap and box-side distances into at most topK
// candidate detections, as the graph's own decoding does: a heatmap value is
// a candidate when it equals the maximum of its 3x3 neighbourhood in the
// same class (TF's "SAME" max-pool); the topK best (ties: lower flat index
// first) become boxes centred on their cell. Boxes are not clipped.
func decode(kp, wh []float32, topK int, minScore float32) []Detection {
	const n, nc = gridSize, NumClasses
	h := &candHeap{}
	for y := 0; y < n; y++ {
		for x := 0; x < n; x++ {
			base := (y*n + x) * nc
			for c := 0; c < nc; c++ {
				v := kp[base+c]
				if v < minScore || v <= 0 {
					continue
				}
				if h.Len() == topK && !better(cand{v, base + c}, (*h)[0]) {
					continue
				}
				if !isPeak(kp, y, x, c, v) {
					continue
				}
				if h.Len() < topK {
					heap.Push(h, cand{v, base + c})
				} else {
					(*h)[0] = cand{v, base + c}
					heap.Fix(h, 0)
				}
			}
		}
	}
	cs := []cand(*h)
	sort.Slice(cs, func(i, j int) bool { return better(cs[i], cs[j]) })
	dets := make([]Detection, len(cs))
	for i, c := range cs {
		cell := c.idx / nc
		y, x := cell/n, cell%n
		d := wh[cell*4 : cell*4+4]
		fx, fy := float32(x)*gridStride, float32(y)*gridStride
		dets[i] = Detection{
			Box:   [4]float32{fx - d[0], fy - d[1], fx + d[2], fy + d[3]},
			Class: c.idx % nc,
			Score: c.score,
		}
	}
	return dets
}

func isPeak(kp []float32, y, x, c int, v float32) bool {
	const n, nc = gridSize, NumClasses
	for yy := max(y-1, 0); yy <= min(y+1, n-1); yy++ {
		for xx := max(x-1, 0); xx <= min(x+1, n-1); xx++ {
			if kp[(yy*n+xx)*nc+c] > v {
				return false
			}
		}
	}
	return true
}

type cand struct {
	score float32
	idx   int
}

// better orders candidates as TF's sorted TopK does: higher score first,
// lower index first among equal scores.
func better(a, b cand) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.idx < b.idx
}

// candHeap is a min-heap: its root is the worst candidate kept.
type candHeap []cand

func (h candHeap) Len() int           { return len(h) }
func (h candHeap) Less(i, j int) bool { return better(h[j], h[i]) }
func (h candHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *candHeap) Push(x any)        { *h = append(*h, x.(cand)) }
func (h *candHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// IoU returns the intersection over union of two x1,y1,x2,y2 boxes.
func IoU(a, b [4]float32) float32 {
	iw := min(a[2], b[2]) - max(a[0], b[0])
	ih := min(a[3], b[3]) - max(a[1], b[1])
	if iw <= 0 || ih <= 0 {
		return 0
	}
	inter := iw * ih
	ua := (a[2]-a[0])*(a[3]-a[1]) + (b[2]-b[0])*(b[3]-b[1]) - inter
	if ua <= 0 {
		return 0
	}
	return inter / ua
}

// nms keeps, best first, each detection that overlaps no kept one by more
// than iou, regardless of class, up to maxDet; dets must be sorted best first.
func nms(dets []Detection, iou float32, maxDet int) []Detection {
	var kept []Detection
	for _, d := range dets {
		if len(kept) == maxDet {
			break
		}
		ok := true
		for _, k := range kept {
			if IoU(d.Box, k.Box) > iou {
				ok = false
				break
			}
		}
		if ok {
			kept = append(kept, d)
		}
	}
	return kept
}
