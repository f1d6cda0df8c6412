package extract

// Detector returns the detector e runs.
func (e *Extractor) Detector() Detector { return e.det }

// WithDetector returns an extractor with e's options over det: the same
// maps, boxes and threshold (a fine-tuned detector, detect.Tuned, in
// place of the published one).
func (e *Extractor) WithDetector(det Detector) (*Extractor, error) { return New(det, e.opt) }

// WithUntuned returns e asking its fine-tuned detector for the published
// detector's regions and global vector too (Options.Untuned).
func (e *Extractor) WithUntuned() (*Extractor, error) {
	opt := e.opt
	opt.Untuned = true
	return New(e.det, opt)
}

// Untuned reports whether e gives the published detector's regions and
// global vector beside its fine-tuned detector's (Options.Untuned, with a
// fine-tuned part to run).
func (e *Extractor) Untuned() bool { return e.opt.Untuned && e.ident.Tuned != "" }

// Untuned returns f as the detector without its fine-tuned part makes it:
// a copy whose Regions and Global are f's UntunedRegions and
// UntunedGlobal (the same boxes, classes and scores), or nil when f holds
// none (an extractor without Options.Untuned or without a tuned part).
func (f *Features) Untuned() *Features {
	if f.UntunedRegions == nil {
		return nil
	}
	u := *f
	u.Regions, u.Global = f.UntunedRegions, f.UntunedGlobal
	u.UntunedRegions, u.UntunedGlobal = nil, nil
	return &u
}
