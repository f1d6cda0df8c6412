// Package data reads and writes the image-text datasets that retrieval
// models train and evaluate on, in the formats users already have:
//
//   - precomputed features (VSE++/SCAN "precomp"): {split}_ims.npy and
//     {split}_caps.txt, plus xmr's optional boxes, image sizes, valid-region
//     counts and image ids beside them (LoadPrecomp, WritePrecomp);
//   - per-image bottom-up files (TERAN/TERN): bu_att/{id}.npz and
//     bu_box/{id}.npy, with captions and splits from a Karpathy split JSON
//     (LoadBottomUp);
//   - the bottom-up attention extractor's TSV (Anderson et al.), read as a
//     stream (TSVReader, ReadTSV, CollectTSV, LoadTSV);
//   - Karpathy split JSON files, dataset_coco.json and dataset_flickr30k.json
//     (ReadKarpathy, LoadKarpathy).
//
// A Source names a dataset in any of these formats (or detects the format
// from its files) and loads its splits by the precomp names train, dev, test
// and testall, whatever the format (Source.Load).
//
// Every loader returns a *Split: the image features of one split as a flat
// float32 Regions array (N images x R region slots x D features, memory
// mapped where the file allows it), the captions of those images, CapsPerImage
// consecutive captions per image, and optional image ids and pixel sizes.
//
// Loaders validate what they read: shapes against caption counts, NaN and Inf
// in features, missing files for listed images. Errors name the file and the
// record, line or field at fault. Bad input never panics.
//
// docs/formats.md describes every format in detail.
package data
