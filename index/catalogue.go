package index

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"runtime"
	"strings"

	"github.com/xmr-project/xmr/internal/infile"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver: no cgo, no server
)

// The catalogue is an SQLite database beside the segments: what a search
// result shows (ids, captions, image paths, boxes, sizes), keyed by item
// number. Rows name the segment that holds their vectors; the manifest
// decides which segments exist, so rows of a segment that a killed build
// wrote but never published are invisible and removed by the next build.
const catalogueSchema = `
CREATE TABLE IF NOT EXISTS images (
	id       INTEGER PRIMARY KEY,  -- item number among the index's images
	ext_id   TEXT NOT NULL UNIQUE, -- the dataset's image id
	segment  TEXT NOT NULL,        -- segment file holding its vectors
	row      INTEGER NOT NULL,     -- item within that segment
	path     TEXT NOT NULL DEFAULT '', -- image file, when known
	width    REAL NOT NULL DEFAULT 0,  -- pixels, 0 when unknown
	height   REAL NOT NULL DEFAULT 0,
	boxes    BLOB                  -- float32 x1 y1 x2 y2 per region, normalised to [0, 1]
);
CREATE TABLE IF NOT EXISTS captions (
	id       INTEGER PRIMARY KEY,  -- item number among the index's captions
	image_id INTEGER NOT NULL REFERENCES images(id),
	text     TEXT NOT NULL,
	segment  TEXT NOT NULL,
	row      INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS captions_image ON captions(image_id);
`

// catalogue wraps the SQLite database.
type catalogue struct {
	path string
	db   *sql.DB
}

// openCatalogue opens (creating when create is set) the database at path.
func openCatalogue(path string, create bool) (*catalogue, error) {
	if err := checkCatalogueFiles(path, create); err != nil {
		return nil, err
	}
	mode := "ro"
	if create {
		mode = "rwc"
	}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=" + mode + "&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)"
	if create {
		dsn += "&_pragma=synchronous(FULL)"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open catalogue %s: %w", path, err)
	}
	// One connection writes; reads (a served index answers lookups from
	// many requests at once) get one per core.
	if create {
		db.SetMaxOpenConns(1)
	} else {
		db.SetMaxOpenConns(max(2, runtime.GOMAXPROCS(0)))
	}
	c := &catalogue{path: path, db: db}
	if create {
		if _, err := db.Exec(catalogueSchema); err != nil {
			db.Close()
			return nil, fmt.Errorf("catalogue %s: create tables: %w", path, err)
		}
	} else if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open catalogue %s: %w", path, err)
	}
	return c, nil
}

func (c *catalogue) close() error { return c.db.Close() }

// checkCatalogueFiles refuses a catalogue, or a journal that SQLite would
// open beside it (-journal, -wal, -shm), that is not a regular file. The
// SQLite library opens them with a plain open(2), which for a FIFO
// without a writer blocks for good, deaf to contexts and to SIGTERM; this
// check opens each as every other input is opened (internal/infile: non-
// blocking, then fstat), so a FIFO is refused at once, naming it. The
// journals may be missing, and so may the catalogue when it is created.
// (A file swapped for a FIFO between this check and SQLite's open is not
// caught: that takes a writer in the directory racing the reader, not a
// damaged or hostile index.)
func checkCatalogueFiles(path string, create bool) error {
	for _, p := range []string{path, path + "-journal", path + "-wal", path + "-shm"} {
		f, err := infile.Open(p)
		if errors.Is(err, fs.ErrNotExist) && (p != path || create) {
			continue
		}
		if err != nil {
			return fmt.Errorf("open catalogue: %w", err)
		}
		f.Close()
	}
	return nil
}

// ImageRow is what the catalogue holds about an image.
type ImageRow struct {
	ID     string       `json:"id"`             // the dataset's image id
	Path   string       `json:"path,omitempty"` // image file, when known
	Width  float32      `json:"width,omitempty"`
	Height float32      `json:"height,omitempty"`
	Boxes  [][4]float32 `json:"boxes,omitempty"` // per region, normalised x1 y1 x2 y2
}

// CaptionRow is what the catalogue holds about a caption.
type CaptionRow struct {
	Text    string `json:"text"`
	ImageID string `json:"image_id"` // the dataset id of the image it describes
}

// imageEntry and captionEntry are catalogue rows about to be inserted, with
// the segment and row of their vectors.
type imageEntry struct {
	segment string
	row     int
	ImageRow
}

type captionEntry struct {
	segment string
	row     int
	CaptionRow
}

// insert adds image and caption rows numbered from firstImage and
// firstCaption, in one transaction. Rows of segments not in keep (left by a
// killed build) are removed first. A caption's image is looked up among the
// new images, then among those already in the catalogue.
func (c *catalogue) insert(ctx context.Context, images []imageEntry, captions []captionEntry, firstImage, firstCaption int, keep []string) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("catalogue %s: %w", c.path, err)
	}
	defer tx.Rollback()
	if err := dropOrphans(ctx, tx, keep); err != nil {
		return fmt.Errorf("catalogue %s: %w", c.path, err)
	}
	imgStmt, err := tx.PrepareContext(ctx, `INSERT INTO images (id, ext_id, segment, row, path, width, height, boxes) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("catalogue %s: %w", c.path, err)
	}
	defer imgStmt.Close()
	ids := map[string]int{}
	for i, im := range images {
		id := firstImage + i
		if _, dup := ids[im.ID]; dup {
			return fmt.Errorf("catalogue %s: image id %q appears twice in the collection", c.path, im.ID)
		}
		ids[im.ID] = id
		if _, err := imgStmt.ExecContext(ctx, id, im.ID, im.segment, im.row, im.Path, im.Width, im.Height, encodeBoxes(im.Boxes)); err != nil {
			if strings.Contains(err.Error(), "UNIQUE") {
				return fmt.Errorf("catalogue %s: image id %q is already in the index", c.path, im.ID)
			}
			return fmt.Errorf("catalogue %s: image %q: %w", c.path, im.ID, err)
		}
	}
	capStmt, err := tx.PrepareContext(ctx, `INSERT INTO captions (id, image_id, text, segment, row) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("catalogue %s: %w", c.path, err)
	}
	defer capStmt.Close()
	for k, cp := range captions {
		img, ok := ids[cp.ImageID]
		if !ok {
			err := tx.QueryRowContext(ctx, `SELECT id FROM images WHERE ext_id = ?`, cp.ImageID).Scan(&img)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("catalogue %s: caption %d describes image %q, which is neither in the index nor added", c.path, k, cp.ImageID)
			}
			if err != nil {
				return fmt.Errorf("catalogue %s: caption %d: %w", c.path, k, err)
			}
		}
		if _, err := capStmt.ExecContext(ctx, firstCaption+k, img, cp.Text, cp.segment, cp.row); err != nil {
			return fmt.Errorf("catalogue %s: caption %d: %w", c.path, k, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("catalogue %s: commit: %w", c.path, err)
	}
	return nil
}

// dropOrphans deletes the rows of segments not in keep.
func dropOrphans(ctx context.Context, tx *sql.Tx, keep []string) error {
	args := make([]any, len(keep))
	marks := make([]string, len(keep))
	for i, k := range keep {
		args[i], marks[i] = k, "?"
	}
	in := "''"
	if len(keep) > 0 {
		in = strings.Join(marks, ",")
	}
	for _, table := range []string{"captions", "images"} {
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+table+" WHERE segment NOT IN ("+in+")", args...); err != nil {
			return fmt.Errorf("remove rows of unpublished segments: %w", err)
		}
	}
	return nil
}

// image returns the catalogue row of image item id.
func (c *catalogue) image(ctx context.Context, id int) (ImageRow, error) {
	var r ImageRow
	var boxes []byte
	err := c.db.QueryRowContext(ctx, `SELECT ext_id, path, width, height, boxes FROM images WHERE id = ?`, id).Scan(&r.ID, &r.Path, &r.Width, &r.Height, &boxes)
	if err != nil {
		return r, fmt.Errorf("catalogue %s: image %d: %w", c.path, id, err)
	}
	r.Boxes = decodeBoxes(boxes)
	return r, nil
}

// imageByExtID returns the item number of the image with dataset id ext.
func (c *catalogue) imageByExtID(ctx context.Context, ext string) (int, error) {
	var id int
	err := c.db.QueryRowContext(ctx, `SELECT id FROM images WHERE ext_id = ?`, ext).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("no image %q in the index: %w", ext, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("catalogue %s: %w", c.path, err)
	}
	return id, nil
}

// caption returns the catalogue row of caption item id.
func (c *catalogue) caption(ctx context.Context, id int) (CaptionRow, error) {
	var r CaptionRow
	err := c.db.QueryRowContext(ctx, `SELECT c.text, i.ext_id FROM captions c JOIN images i ON i.id = c.image_id WHERE c.id = ?`, id).Scan(&r.Text, &r.ImageID)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("catalogue %s: no caption %d: %w", c.path, id, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("catalogue %s: caption %d: %w", c.path, id, err)
	}
	return r, nil
}

// captionsOf returns the item numbers and texts of the captions of image
// item id, in item order.
func (c *catalogue) captionsOf(ctx context.Context, id int) ([]CaptionItem, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT id, text FROM captions WHERE image_id = ? ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("catalogue %s: captions of image %d: %w", c.path, id, err)
	}
	defer rows.Close()
	var out []CaptionItem
	for rows.Next() {
		var ci CaptionItem
		if err := rows.Scan(&ci.Item, &ci.Text); err != nil {
			return nil, fmt.Errorf("catalogue %s: captions of image %d: %w", c.path, id, err)
		}
		out = append(out, ci)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("catalogue %s: captions of image %d: %w", c.path, id, err)
	}
	return out, nil
}

// counts returns how many images and captions the catalogue lists in the
// given segments.
func (c *catalogue) counts(ctx context.Context, imageSegs, captionSegs []string) (images, captions int, err error) {
	count := func(table string, segs []string) (int, error) {
		if len(segs) == 0 {
			return 0, nil
		}
		args := make([]any, len(segs))
		for i, s := range segs {
			args[i] = s
		}
		var n int
		q := "SELECT COUNT(*) FROM " + table + " WHERE segment IN (?" + strings.Repeat(",?", len(segs)-1) + ")"
		err := c.db.QueryRowContext(ctx, q, args...).Scan(&n)
		return n, err
	}
	if images, err = count("images", imageSegs); err != nil {
		return 0, 0, fmt.Errorf("catalogue %s: %w", c.path, err)
	}
	if captions, err = count("captions", captionSegs); err != nil {
		return 0, 0, fmt.Errorf("catalogue %s: %w", c.path, err)
	}
	return images, captions, nil
}

func encodeBoxes(boxes [][4]float32) []byte {
	if len(boxes) == 0 {
		return nil
	}
	b := make([]byte, 0, 16*len(boxes))
	for _, bx := range boxes {
		for _, v := range bx {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	return b
}

func decodeBoxes(b []byte) [][4]float32 {
	out := make([][4]float32, len(b)/16)
	for i := range out {
		for k := range 4 {
			out[i][k] = math.Float32frombits(binary.LittleEndian.Uint32(b[16*i+4*k:]))
		}
	}
	return out
}
