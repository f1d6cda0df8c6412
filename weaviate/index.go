package weaviate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
)

// Index is an open Weaviate-backed index: the manifest, a client of the
// server and, loaded on first use, the model. It implements
// index.Searcher and is safe for concurrent use.
type Index struct {
	dir string
	man *Manifest
	c   *Client

	modelOnce sync.Once
	model     model.Model
	modelErr  error
}

var _ index.Searcher = (*Index)(nil)

// OpenOptions tune Open. The zero value (and nil) gives the defaults.
type OpenOptions struct {
	// URL, when set, replaces the manifest's server address (another node
	// of the cluster, or the server moved).
	URL string
}

// Open opens the Weaviate-backed index in dir. It refuses an index whose
// upload did not finish, and checks that the server answers.
func Open(ctx context.Context, dir string, o *OpenOptions) (*Index, error) {
	man, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	if o != nil && o.URL != "" {
		man.Config.URL = o.URL
	}
	if !man.Complete {
		return nil, fmt.Errorf("weaviate index %s: the upload is unfinished (%d of %d images, %d of %d captions): run the same xmr index command again to resume it",
			dir, man.ImagesDone, man.Images, man.CaptionsDone, man.Captions)
	}
	c, err := NewClient(man.Config.URL)
	if err != nil {
		return nil, fmt.Errorf("weaviate index %s: %w", dir, err)
	}
	if err := c.Ready(ctx); err != nil {
		return nil, fmt.Errorf("weaviate index %s: the server does not answer: %w", dir, err)
	}
	return &Index{dir: dir, man: man, c: c}, nil
}

// Attach opens an index described by a manifest value, without an index
// directory (its Model is then unavailable): for programs, such as the
// benchmarks, that upload with an Uploader and search with encoded
// queries (Search).
func Attach(ctx context.Context, man Manifest) (*Index, error) {
	if err := man.Config.check(); err != nil {
		return nil, err
	}
	c, err := NewClient(man.Config.URL)
	if err != nil {
		return nil, err
	}
	if err := c.Ready(ctx); err != nil {
		return nil, fmt.Errorf("weaviate at %s does not answer: %w", man.Config.URL, err)
	}
	man.Complete = true
	return &Index{dir: "", man: &man, c: c}, nil
}

// Close releases nothing: the server holds the index.
func (ix *Index) Close() error { return nil }

// Manifest returns a copy of the index's manifest.
func (ix *Index) Manifest() Manifest { return *ix.man }

// Len returns the number of images and captions.
func (ix *Index) Len() (images, captions int) { return ix.man.Images, ix.man.Captions }

// ModelInfo identifies the model that encoded the index.
func (ix *Index) ModelInfo() index.ModelInfo { return ix.man.Model }

// Model returns the model that encoded the index, read from the index
// directory on first use.
func (ix *Index) Model() (model.Model, error) {
	ix.modelOnce.Do(func() {
		if ix.dir == "" {
			ix.modelErr = errors.New("weaviate index: attached without a directory, so without its model")
			return
		}
		ix.model, ix.modelErr = index.LoadModel(ix.dir, ix.man.Model)
		if ix.modelErr != nil {
			ix.modelErr = fmt.Errorf("weaviate index %s: %w", ix.dir, ix.modelErr)
		}
	})
	return ix.model, ix.modelErr
}

func (ix *Index) scoring(o *index.SearchOptions) model.Scoring {
	if o != nil && o.Scoring != "" {
		return o.Scoring
	}
	return ix.man.Model.Scoring
}

// DefaultCandidates returns how many candidates a re-ranked search of k
// results fetches when SearchOptions.Candidates is not positive.
func DefaultCandidates(k int) int { return max(10*k, 100) }

// fetch says how a search reaches the items it ranks.
type fetch int

const (
	// fetchDirect: Weaviate's maxSim search ranks the best k itself
	// (text-to-image MrSw).
	fetchDirect fetch = iota
	// fetchMulti: candidates by maxSim of the multi-vectors, re-ranked
	// exactly in xmr.
	fetchMulti
	// fetchGlobal: candidates by the global vector, re-ranked.
	fetchGlobal
	// fetchAll: every object (the cursor API), re-ranked: an exhaustive
	// ranking.
	fetchAll
)

// plan returns how a search of k results with scoring s reaches its items
// among total, and how many it fetches (candidates when positive, else
// DefaultCandidates(k); at least k). Scorings that no nearest-neighbour
// search of Weaviate's orders by (SEAM's order scoring) read every item,
// as the local index scores every item for them; so does exact, and any
// search whose candidates would be every item.
func plan(s model.Scoring, queryIsText, exact bool, k, candidates, total int) (fetch, int) {
	if queryIsText && s == model.MrSw && !exact {
		return fetchDirect, k
	}
	limit := DefaultCandidates(k)
	if candidates > 0 {
		limit = max(candidates, k)
	}
	switch {
	case exact || limit >= total || (!s.Alignment() && s != model.Global):
		return fetchAll, total
	case s == model.Global:
		return fetchGlobal, limit
	}
	return fetchMulti, limit
}

// hit is one object of a GraphQL answer: the properties of both
// collections, the distance and, when asked for, the vectors.
type hit struct {
	Item       int       `json:"item"`
	ExtID      string    `json:"extId"`
	Path       string    `json:"path"`
	Width      float32   `json:"width"`
	Height     float32   `json:"height"`
	Boxes      []float32 `json:"boxes"`
	Pos        []int32   `json:"pos"`
	Text       string    `json:"text"`
	ImageID    string    `json:"imageId"`
	Additional struct {
		ID       string                     `json:"id"`
		Distance float32                    `json:"distance"`
		Vectors  map[string]json.RawMessage `json:"vectors"`
	} `json:"_additional"`
}

func (h *hit) imageRow() index.ImageRow {
	r := index.ImageRow{ID: h.ExtID, Path: h.Path, Width: h.Width, Height: h.Height}
	for k := 0; k+4 <= len(h.Boxes); k += 4 {
		r.Boxes = append(r.Boxes, [4]float32{h.Boxes[k], h.Boxes[k+1], h.Boxes[k+2], h.Boxes[k+3]})
	}
	return r
}

// embeddings gathers the vectors of hits (multi-vector multi and the
// global vector) into Embeddings of dimension d, one item per hit.
func embeddings(hits []hit, multi string, d int) (*model.Embeddings, error) {
	e := &model.Embeddings{Dim: d, Offsets: []int{0}}
	for i := range hits {
		h := &hits[i]
		var vecs [][]float32
		if raw, ok := h.Additional.Vectors[multi]; ok && len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &vecs); err != nil {
				return nil, fmt.Errorf("object %s: vector %s: %w", h.Additional.ID, multi, err)
			}
		}
		var g []float32
		if err := json.Unmarshal(h.Additional.Vectors[vecGlobal], &g); err != nil || len(g) != d {
			return nil, fmt.Errorf("object %s: global vector: want %d floats (%v)", h.Additional.ID, d, err)
		}
		if len(h.Pos) != len(vecs) {
			return nil, fmt.Errorf("object %s: %d positions for %d vectors", h.Additional.ID, len(h.Pos), len(vecs))
		}
		for _, v := range vecs {
			if len(v) != d {
				return nil, fmt.Errorf("object %s: a %d-d vector in %s, the index's are %d-d", h.Additional.ID, len(v), multi, d)
			}
			e.Vecs = append(e.Vecs, v...)
		}
		e.Pos = append(e.Pos, h.Pos...)
		e.Global = append(e.Global, g...)
		e.Offsets = append(e.Offsets, e.Offsets[len(e.Offsets)-1]+len(vecs))
	}
	return e, nil
}

// Fields of the GraphQL answers.
const (
	imageFields   = "item extId path width height boxes pos"
	captionFields = "item text imageId pos"
)

// readConsistency is the GraphQL argument that reads at consistency level
// ONE, for replicated collections (Weaviate knows the argument only for
// those).
func (ix *Index) readConsistency() string {
	if ix.man.Config.Replication > 1 {
		return ",consistencyLevel:ONE"
	}
	return ""
}

// nearQuery returns a GraphQL Get of the limit objects of class nearest
// to the query vectors under the named vector target: a multi-vector
// (maxSim) when multi, else the single vector vecs[0].
func nearQuery(class, target string, vecs [][]float32, multi bool, limit int, fields string, withVectors []string, consistency string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{Get{%s(limit:%d%s,nearVector:{targetVectors:[%q],vectorPerTarget:{%s:`, class, limit, consistency, target, target)
	if multi {
		b.WriteString("[[")
	}
	for i, v := range vecs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		for k, x := range v {
			if k > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatFloat(float64(x), 'g', -1, 32))
		}
		b.WriteByte(']')
		if !multi {
			break
		}
	}
	if multi {
		b.WriteString("]]")
	}
	fmt.Fprintf(&b, `}}){%s _additional{id distance`, fields)
	if len(withVectors) > 0 {
		fmt.Fprintf(&b, ` vectors{%s}`, strings.Join(withVectors, " "))
	}
	b.WriteString(`}}}}`)
	return b.String()
}

// get runs a Get query on class and returns its objects.
func (ix *Index) get(ctx context.Context, class, query string) ([]hit, error) {
	var out struct {
		Get map[string][]hit `json:"Get"`
	}
	if err := ix.c.graphQL(ctx, query, &out); err != nil {
		return nil, err
	}
	return out.Get[class], nil
}

// allPage is the number of objects per request when all are read.
const allPage = 500

// all reads every object of class with the cursor API (in id order).
func (ix *Index) all(ctx context.Context, class, fields string, withVectors []string) ([]hit, error) {
	var out []hit
	after := ""
	add := ""
	if len(withVectors) > 0 {
		add = fmt.Sprintf(" vectors{%s}", strings.Join(withVectors, " "))
	}
	for {
		cursor := ""
		if after != "" {
			cursor = fmt.Sprintf(`,after:%q`, after)
		}
		page, err := ix.get(ctx, class, fmt.Sprintf(`{Get{%s(limit:%d%s){%s _additional{id%s}}}}`, class, allPage, cursor, fields, add))
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < allPage {
			return out, nil
		}
		after = page[len(page)-1].Additional.ID
	}
}

// rows splits a vector of d floats a row into rows.
func rows(v []float32, d int) [][]float32 {
	out := make([][]float32, 0, len(v)/d)
	for k := 0; k+d <= len(v); k += d {
		out = append(out, v[k:k+d])
	}
	return out
}

// Search returns the items that an encoded query matches best: images
// for a caption (queryIsText), captions for an image. Explanations name
// no words for a text query given this way.
func (ix *Index) Search(ctx context.Context, q *model.Embeddings, queryIsText bool, o *index.SearchOptions) ([]index.Result, error) {
	if q.Len() != 1 || q.Dim != ix.man.Model.Dim {
		return nil, fmt.Errorf("search: the query must be one item of %d-d vectors, is %d items of %d", ix.man.Model.Dim, q.Len(), q.Dim)
	}
	return ix.search(ctx, q, queryIsText, nil, nil, o)
}

// search ranks the items of the other modality against q. Text-to-image
// MrSw is Weaviate's maxSim search; the other alignment scorings and the
// global cosine fetch candidates (by maxSim of the multi-vectors, or by
// the global vector) with their vectors and re-rank them exactly; the
// order scoring re-ranks every item (see plan).
func (ix *Index) search(ctx context.Context, q *model.Embeddings, queryIsText bool, words []string, queryBoxes [][4]float32, o *index.SearchOptions) ([]index.Result, error) {
	k := 10
	if o != nil && o.K > 0 {
		k = o.K
	}
	explainIt := o != nil && o.Explain
	s := ix.scoring(o)
	d := ix.man.Model.Dim
	class, multi, fields := ix.man.Config.CaptionsCollection(), vecWords, captionFields
	if queryIsText {
		class, multi, fields = ix.man.Config.ImagesCollection(), vecRegions, imageFields
	}
	total := ix.man.Captions
	if queryIsText {
		total = ix.man.Images
	}
	candidates := 0
	if o != nil {
		candidates = o.Candidates
	}
	f, limit := plan(s, queryIsText, o != nil && o.Exact, k, candidates, total)
	direct := f == fetchDirect
	var withVectors []string
	if !direct || explainIt {
		withVectors = []string{multi, vecGlobal}
	}
	var hits []hit
	var err error
	switch {
	case f == fetchAll:
		hits, err = ix.all(ctx, class, fields, withVectors)
	case f == fetchGlobal:
		hits, err = ix.get(ctx, class, nearQuery(class, vecGlobal, [][]float32{q.GlobalOf(0)}, false, limit, fields, withVectors, ix.readConsistency()))
	case q.Count(0) == 0:
		return nil, fmt.Errorf("search: the query has no vectors to align: %w", index.ErrBadQuery)
	default:
		hits, err = ix.get(ctx, class, nearQuery(class, multi, rows(q.Item(0), d), true, limit, fields, withVectors, ix.readConsistency()))
	}
	if err != nil {
		return nil, fmt.Errorf("search %s: %w", class, err)
	}
	var items *model.Embeddings
	if withVectors != nil {
		if items, err = embeddings(hits, multi, d); err != nil {
			return nil, fmt.Errorf("search %s: %w", class, err)
		}
	}
	order := make([]model.Hit, len(hits))
	if direct {
		for i, h := range hits {
			// Weaviate's dot distance is the negated maxSim score.
			order[i] = model.Hit{Index: i, Score: -h.Additional.Distance}
		}
	} else {
		var sc []float32
		if queryIsText {
			sc, err = model.ScoreMatrix(ctx, items, q, s)
		} else {
			sc, err = model.ScoreMatrix(ctx, q, items, s)
		}
		if err != nil {
			return nil, fmt.Errorf("search: re-rank: %w", err)
		}
		order = model.TopK(sc, k)
	}
	out := make([]index.Result, 0, len(order))
	for r, h := range order {
		ht := &hits[h.Index]
		res := index.Result{Rank: r + 1, Item: ht.Item, Score: h.Score}
		if queryIsText {
			row := ht.imageRow()
			res.Image = &row
			if explainIt {
				res.Explain = index.Explain(model.MatchWords(items, h.Index, q, 0), words, row.Boxes)
			}
		} else {
			res.Caption = &index.CaptionRow{Text: ht.Text, ImageID: ht.ImageID}
			if explainIt {
				res.Explain = index.Explain(model.MatchWords(q, 0, items, h.Index), strings.Fields(ht.Text), queryBoxes)
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// encodeText encodes a sentence as a query is encoded.
func (ix *Index) encodeText(ctx context.Context, text string, s model.Scoring) (*model.Embeddings, error) {
	if strings.TrimSpace(text) == "" {
		return nil, fmt.Errorf("search: empty query text: %w", index.ErrBadQuery)
	}
	m, err := ix.Model()
	if err != nil {
		return nil, err
	}
	q, err := model.EncodeTexts(ctx, m, []string{text}, nil)
	if err != nil {
		return nil, fmt.Errorf("search: encode %q: %w", text, err)
	}
	if s.Alignment() && q.Count(0) == 0 {
		return nil, fmt.Errorf("search: %q has no word that takes part in the alignment (only stop words or symbols?): %w", text, index.ErrBadQuery)
	}
	return q, nil
}

// SearchText returns the images that text describes best.
func (ix *Index) SearchText(ctx context.Context, text string, o *index.SearchOptions) ([]index.Result, error) {
	q, err := ix.encodeText(ctx, text, ix.scoring(o))
	if err != nil {
		return nil, err
	}
	return ix.search(ctx, q, true, strings.Fields(text), nil, o)
}

// SearchImage returns the captions that describe the indexed image
// imageID best.
func (ix *Index) SearchImage(ctx context.Context, imageID string, o *index.SearchOptions) ([]index.Result, error) {
	q, row, err := ix.imageVectors(ctx, imageID)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	return ix.search(ctx, q, false, nil, row.Boxes, o)
}

// restObject is an object as GET /v1/objects returns it.
type restObject struct {
	ID         string                     `json:"id"`
	Properties json.RawMessage            `json:"properties"`
	Vectors    map[string]json.RawMessage `json:"vectors"`
}

// object fetches one object by id; a missing one is an error wrapping
// index.ErrNotFound that names what.
func (ix *Index) object(ctx context.Context, class, id, what string, vectors bool) (*hit, error) {
	var o restObject
	if err := ix.c.getObject(ctx, class, id, vectors, &o); err != nil {
		if errors.Is(err, errNotFound) {
			return nil, fmt.Errorf("%s is not in the index: %w", what, index.ErrNotFound)
		}
		return nil, err
	}
	var h hit
	if err := json.Unmarshal(o.Properties, &h); err != nil {
		return nil, fmt.Errorf("%s: object %s: %w", what, o.ID, err)
	}
	h.Additional.ID, h.Additional.Vectors = o.ID, o.Vectors
	return &h, nil
}

// imageVectors returns the embeddings (one item) and catalogue row of the
// indexed image imageID.
func (ix *Index) imageVectors(ctx context.Context, imageID string) (*model.Embeddings, index.ImageRow, error) {
	class := ix.man.Config.ImagesCollection()
	h, err := ix.object(ctx, class, objectID(class, imageID), fmt.Sprintf("image %q", imageID), true)
	if err != nil {
		return nil, index.ImageRow{}, err
	}
	e, err := embeddings([]hit{*h}, vecRegions, ix.man.Model.Dim)
	if err != nil {
		return nil, index.ImageRow{}, fmt.Errorf("image %q: %w", imageID, err)
	}
	return e, h.imageRow(), nil
}

// Image returns the catalogue row of the indexed image imageID.
func (ix *Index) Image(ctx context.Context, imageID string) (index.ImageRow, error) {
	class := ix.man.Config.ImagesCollection()
	h, err := ix.object(ctx, class, objectID(class, imageID), fmt.Sprintf("image %q", imageID), false)
	if err != nil {
		return index.ImageRow{}, err
	}
	return h.imageRow(), nil
}

// Caption returns the catalogue row of caption item n.
func (ix *Index) Caption(ctx context.Context, n int) (index.CaptionRow, error) {
	h, err := ix.caption(ctx, n, false)
	if err != nil {
		return index.CaptionRow{}, err
	}
	return index.CaptionRow{Text: h.Text, ImageID: h.ImageID}, nil
}

func (ix *Index) caption(ctx context.Context, n int, vectors bool) (*hit, error) {
	if n < 0 || n >= ix.man.Captions {
		return nil, fmt.Errorf("no caption %d in the index (it holds captions 0 to %d): %w", n, ix.man.Captions-1, index.ErrNotFound)
	}
	class := ix.man.Config.CaptionsCollection()
	return ix.object(ctx, class, objectID(class, strconv.Itoa(n)), fmt.Sprintf("caption %d", n), vectors)
}

// ImageCaptions returns the indexed captions of the image imageID, in
// item order.
func (ix *Index) ImageCaptions(ctx context.Context, imageID string) ([]index.CaptionItem, error) {
	if _, err := ix.Image(ctx, imageID); err != nil {
		return nil, err
	}
	class := ix.man.Config.CaptionsCollection()
	id, _ := json.Marshal(imageID)
	query := fmt.Sprintf(`{Get{%s(limit:10000%s,where:{path:["imageId"],operator:Equal,valueText:%s}){item text}}}`, class, ix.readConsistency(), id)
	hits, err := ix.get(ctx, class, query)
	if err != nil {
		return nil, fmt.Errorf("captions of image %q: %w", imageID, err)
	}
	out := make([]index.CaptionItem, len(hits))
	for i, h := range hits {
		out[i] = index.CaptionItem{Item: h.Item, Text: h.Text}
	}
	slices.SortFunc(out, func(a, b index.CaptionItem) int { return a.Item - b.Item })
	return out, nil
}

// Align matches the sentence text with the indexed image imageID.
func (ix *Index) Align(ctx context.Context, imageID, text string, o *index.SearchOptions) (*index.Match, error) {
	s := ix.scoring(o)
	img, row, err := ix.imageVectors(ctx, imageID)
	if err != nil {
		return nil, fmt.Errorf("align: %w", err)
	}
	q, err := ix.encodeText(ctx, text, s)
	if err != nil {
		return nil, err
	}
	return index.MatchPair(ctx, img, row.Boxes, q, strings.Fields(text), s)
}

// AlignCaption matches indexed caption item n with the indexed image
// imageID.
func (ix *Index) AlignCaption(ctx context.Context, imageID string, n int, o *index.SearchOptions) (*index.Match, error) {
	img, row, err := ix.imageVectors(ctx, imageID)
	if err != nil {
		return nil, fmt.Errorf("align: %w", err)
	}
	h, err := ix.caption(ctx, n, true)
	if err != nil {
		return nil, fmt.Errorf("align: %w", err)
	}
	txt, err := embeddings([]hit{*h}, vecWords, ix.man.Model.Dim)
	if err != nil {
		return nil, fmt.Errorf("align: caption %d: %w", n, err)
	}
	return index.MatchPair(ctx, img, row.Boxes, txt, strings.Fields(h.Text), ix.scoring(o))
}
