package extract

// Detector returns the detector e runs.
func (e *Extractor) Detector() Detector { return e.det }

// WithDetector returns an extractor with e's options over det: the same
// maps, boxes and threshold (a fine-tuned detector, detect.Tuned, in
// place of the published one).
func (e *Extractor) WithDetector(det Detector) (*Extractor, error) { return New(det, e.opt) }

// WithUntunedGlobal returns e asking its fine-tuned detector for the
// published detector's global vector too (Options.UntunedGlobal).
func (e *Extractor) WithUntunedGlobal() (*Extractor, error) {
	opt := e.opt
	opt.UntunedGlobal = true
	return New(e.det, opt)
}
