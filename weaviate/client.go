package weaviate

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client speaks Weaviate's REST and GraphQL APIs (the /v1 endpoints): the
// schema, batch imports, objects by id and GraphQL Get queries. It is
// safe for concurrent use.
type Client struct {
	base string // scheme://host:port, no trailing slash
	http *http.Client
}

// NewClient returns a client of the Weaviate server at rawURL
// (http://host:port).
func NewClient(rawURL string) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("weaviate url %q: want http://host:port", rawURL)
	}
	return &Client{base: strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/"), http: &http.Client{Timeout: 5 * time.Minute}}, nil
}

// URL returns the server's address.
func (c *Client) URL() string { return c.base }

// statusError is an answer of the server with an unexpected HTTP status.
type statusError struct {
	method, path string
	code         int
	body         string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("weaviate %s %s: HTTP %d: %s", e.method, e.path, e.code, e.body)
}

// errNotFound is wrapped by the errors for a 404 answer.
var errNotFound = errors.New("not found")

func (e *statusError) Unwrap() error {
	if e.code == http.StatusNotFound {
		return errNotFound
	}
	return nil
}

// do sends a request with a JSON body (none when in is nil) and decodes a
// JSON answer into out (ignored when nil).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		switch v := in.(type) {
		case []byte:
			body = bytes.NewReader(v)
		default:
			b, err := json.Marshal(in)
			if err != nil {
				return fmt.Errorf("weaviate %s %s: %w", method, path, err)
			}
			body = bytes.NewReader(b)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("weaviate %s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("weaviate %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return &statusError{method: method, path: path, code: resp.StatusCode, body: strings.TrimSpace(string(b))}
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("weaviate %s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

// Ready reports whether the server answers its readiness probe.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/v1/.well-known/ready", nil, nil)
}

// WaitReady polls the readiness probe until it succeeds or ctx ends.
func (c *Client) WaitReady(ctx context.Context) error {
	for {
		err := c.Ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("weaviate at %s is not ready: %w (last: %v)", c.base, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Class returns the schema of a collection, or an error wrapping
// errNotFound.
func (c *Client) Class(ctx context.Context, name string) (map[string]any, error) {
	var out map[string]any
	err := c.do(ctx, http.MethodGet, "/v1/schema/"+url.PathEscape(name), nil, &out)
	return out, err
}

// CreateClass creates a collection from its schema.
func (c *Client) CreateClass(ctx context.Context, class map[string]any) error {
	return c.do(ctx, http.MethodPost, "/v1/schema", class, nil)
}

// DeleteClass deletes a collection and its objects.
func (c *Client) DeleteClass(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/schema/"+url.PathEscape(name), nil, nil)
}

// batchResult is one object's answer in a batch import.
type batchResult struct {
	ID     string `json:"id"`
	Result struct {
		Errors *struct {
			Error []struct {
				Message string `json:"message"`
			} `json:"error"`
		} `json:"errors"`
	} `json:"result"`
}

// batch imports objects (encoded as the JSON body of /v1/batch/objects)
// with the given consistency level; an object already there with the same
// id is replaced. It returns the first per-object error.
func (c *Client) batch(ctx context.Context, body []byte, consistency string) error {
	var out []batchResult
	if err := c.do(ctx, http.MethodPost, "/v1/batch/objects?consistency_level="+consistency, body, &out); err != nil {
		return err
	}
	for _, r := range out {
		if r.Result.Errors != nil && len(r.Result.Errors.Error) > 0 {
			return fmt.Errorf("weaviate batch: object %s: %s", r.ID, r.Result.Errors.Error[0].Message)
		}
	}
	return nil
}

// getObject fetches one object by id into out (with its vectors when
// vectors is set), read at consistency level ONE; a missing object is an
// error wrapping errNotFound.
func (c *Client) getObject(ctx context.Context, class, id string, vectors bool, out any) error {
	q := "?consistency_level=ONE"
	if vectors {
		q += "&include=vector"
	}
	return c.do(ctx, http.MethodGet, "/v1/objects/"+url.PathEscape(class)+"/"+url.PathEscape(id)+q, nil, out)
}

// graphQL runs a GraphQL query and decodes its data into out.
func (c *Client) graphQL(ctx context.Context, query string, out any) error {
	var resp struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := c.do(ctx, http.MethodPost, "/v1/graphql", map[string]string{"query": query}, &resp); err != nil {
		return err
	}
	if len(resp.Errors) > 0 {
		msgs := make([]string, len(resp.Errors))
		for i, e := range resp.Errors {
			msgs[i] = e.Message
		}
		return fmt.Errorf("weaviate graphql: %s", strings.Join(msgs, "; "))
	}
	if err := json.Unmarshal(resp.Data, out); err != nil {
		return fmt.Errorf("weaviate graphql: decode the answer: %w", err)
	}
	return nil
}

// objectID returns the deterministic object id of name in a collection:
// a version-5 (SHA-1, name-based) UUID of "collection/name", so that an
// upload run again writes the same objects over themselves.
func objectID(collection, name string) string {
	h := sha1.Sum([]byte("xmr/" + collection + "/" + name))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// QueuedVectors returns the number of vectors waiting in the shards'
// indexing queues (asynchronous indexing), over every node.
func (c *Client) QueuedVectors(ctx context.Context) (int, error) {
	var nodes struct {
		Nodes []struct {
			Shards []struct {
				VectorQueueLength int `json:"vectorQueueLength"`
			} `json:"shards"`
		} `json:"nodes"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/nodes?output=verbose", nil, &nodes); err != nil {
		return 0, err
	}
	n := 0
	for _, nd := range nodes.Nodes {
		for _, s := range nd.Shards {
			n += s.VectorQueueLength
		}
	}
	return n, nil
}

// SetEf sets the HNSW ef (the query-time size of the candidate list; -1:
// dynamic) of every named vector of a collection, a setting Weaviate
// changes without rebuilding the index.
func (c *Client) SetEf(ctx context.Context, class string, ef int) error {
	cl, err := c.Class(ctx, class)
	if err != nil {
		return err
	}
	vc, _ := cl["vectorConfig"].(map[string]any)
	if len(vc) == 0 {
		return fmt.Errorf("collection %s: no named vectors to set ef on", class)
	}
	for name, v := range vc {
		cfg, _ := v.(map[string]any)
		ic, _ := cfg["vectorIndexConfig"].(map[string]any)
		if ic == nil {
			return fmt.Errorf("collection %s: vector %s has no index config", class, name)
		}
		ic["ef"] = ef
	}
	return c.do(ctx, http.MethodPut, "/v1/schema/"+url.PathEscape(class), cl, nil)
}
