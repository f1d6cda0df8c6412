// Package eval measures cross-modal retrieval quality the way the VSE++ and
// TERAN evaluation code does: Recall@K, median and mean rank, rsum, NDCG@p
// with graded relevance, and word-region alignment accuracy. It also computes
// the caption-caption relevance matrices that NDCG needs (ROUGE-L here;
// SPICE lives in the subpackage eval/spice and plugs in through Metric).
//
// Conventions, shared by every function of the package:
//
//   - A similarity matrix has one row per image and one column per caption
//     (images x captions, float32), with CaptionsPerImage (5) consecutive
//     captions per image: image i owns captions 5i..5i+4.
//   - A relevance matrix has one row per caption and one column per image
//     (captions x images); entry [i, j] is tau(caption i, the captions of
//     image j). On disk it is TERAN's raw layout: little-endian float32,
//     row-major, no header.
//   - Ranks are 0-based; a query's ground truth at rank 0 is a hit for R@1.
//     Ties are broken by index: among equal scores the item with the smaller
//     index ranks first (a stable sort by descending score).
//
// See docs/eval.md for the protocols, the NDCG averaging option, the ROUGE-L
// details and the relevance file layout.
package eval
