// The xmr page: search images by sentence, open one to see which region
// each word of the sentence aligns with (boxes labelled with the word and
// its cosine, as in Fig. 7 of the TERAN paper), and find an image's best
// captions. It talks to the JSON API of docs/api.md and nothing else.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";
  const COLOURS = ["#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4",
    "#0a9396", "#f032e6", "#9a6324", "#469990", "#800000"];
  const RESULTS = 24;

  // current is what the dialog shows: an image's details and one
  // sentence's alignment with it.
  const state = { query: "", current: null };

  async function api(method, path, body) {
    const opts = { method, headers: {} };
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    const r = await fetch(path, opts);
    let data = null;
    try { data = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) throw new Error((data && data.error) || `${r.status} ${r.statusText}`);
    return data;
  }

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    e.append(...children);
    return e;
  }

  function svgEl(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function setStatus(msg, isError) {
    const s = $("status");
    s.textContent = msg;
    s.classList.toggle("error", !!isError);
  }

  // dims is an image's size in the units of its boxes' drawing: pixels
  // when known.
  function dims(img) {
    return [img.width || 100, img.height || 100];
  }

  // picture is an image file, or without one a placeholder drawing of the
  // image's regions.
  function picture(img) {
    const [w, h] = dims(img);
    if (img.url) {
      return el("img", { src: img.url, alt: `image ${img.id}`, width: w, height: h, loading: "lazy" });
    }
    const svg = svgEl("svg", { viewBox: `0 0 ${w} ${h}`, class: "placeholder", role: "img",
      "aria-label": `the regions of image ${img.id} (no image file)` });
    svg.append(svgEl("rect", { x: 0, y: 0, width: w, height: h, class: "ph-bg" }));
    for (const b of img.boxes) {
      svg.append(svgEl("rect", { x: b[0] * w, y: b[1] * h, width: (b[2] - b[0]) * w, height: (b[3] - b[1]) * h, class: "ph-box" }));
    }
    return svg;
  }

  async function search(q) {
    state.query = q;
    $("q").value = q;
    $("hint").hidden = true;
    setHash();
    setStatus("Searching…");
    $("results").replaceChildren();
    try {
      const res = await api("POST", "/api/search/text", { text: q, k: RESULTS, explain: true });
      setStatus(`${res.results.length} images for “${q}” (${scoringOf(res)}, ${res.ms.toFixed(1)} ms)`);
      for (const r of res.results) $("results").append(card(r));
    } catch (e) {
      setStatus(e.message, true);
    }
  }

  // fusionOf names the members of a fused index and their weights.
  function fusionOf(members) {
    return "fused: " + members.map((m) => `${m.weight} × ${m.model} (${m.scoring})`).join(" + ");
  }

  // scoringOf says how a response's results were scored.
  function scoringOf(res) {
    return res.fusion ? fusionOf(res.fusion) : `${res.scoring} scoring`;
  }

  function card(r) {
    const b = el("button", { type: "button", class: "card", "data-id": r.image.id, title: `see how “${state.query}” aligns with ${r.image.id}` });
    b.append(el("div", { class: "thumb" }, picture(r.image)),
      el("span", { class: "meta" },
        el("span", { class: "rank" }, `#${r.rank}`),
        el("span", { class: "score" }, r.score.toFixed(3)),
        el("span", { class: "id" }, r.image.id)));
    const q = state.query;
    b.addEventListener("click", () => openImage(r.image.id, { text: q, score: r.score, alignments: r.alignments }));
    return b;
  }

  // openImage shows image id in the dialog with the alignment of match
  // (a sentence, its score and alignments); without one, that of the
  // current query, or of the image's first caption.
  async function openImage(id, match) {
    let d;
    try {
      d = await api("GET", "/api/images/" + encodeURIComponent(id));
    } catch (e) {
      setStatus(e.message, true);
      return;
    }
    state.current = { image: d, text: "", score: null, alignments: [] };
    $("detail-title").textContent = d.id;
    $("captions").replaceChildren();
    $("findcaps").disabled = false;
    $("truth").replaceChildren(...d.captions.map((c) => {
      const b = el("button", { type: "button", class: "link", "data-item": c.item }, c.text);
      b.addEventListener("click", () => alignWith({ image_id: d.id, caption: c.item }, b));
      return el("li", {}, b);
    }));
    const dialog = $("detail");
    if (!dialog.open) dialog.showModal();
    setHash();
    if (match) {
      show(match);
    } else if (state.query) {
      await alignWith({ image_id: d.id, text: state.query });
    } else if (d.captions.length > 0) {
      await alignWith({ image_id: d.id, caption: d.captions[0].item });
    } else {
      show({ text: "", score: null, alignments: [] });
    }
  }

  async function alignWith(req, button) {
    try {
      const m = await api("POST", "/api/align", req);
      show({ text: m.text, score: m.score, alignments: m.alignments }, button);
    } catch (e) {
      $("score").textContent = e.message;
    }
  }

  // show draws one sentence's alignment on the current image; button, if
  // given, is marked as the sentence shown.
  function show(match, button) {
    Object.assign(state.current, match);
    for (const b of document.querySelectorAll("#detail .active")) b.classList.remove("active");
    if (button) button.classList.add("active");
    draw();
  }

  // colourOf gives each alignment a colour by its place in the sentence.
  function colourOf(i) { return COLOURS[i % COLOURS.length]; }

  function draw() {
    const c = state.current;
    const img = c.image;
    const [w, h] = dims(img);
    const showStop = $("stopwords").checked;
    const shown = c.alignments.map((a, i) => ({ ...a, colour: colourOf(i) }))
      .filter((a) => a.box && (showStop || !a.stop_word));

    const stage = $("stage");
    stage.style.aspectRatio = `${w} / ${h}`;
    const svg = svgEl("svg", { viewBox: `0 0 ${w} ${h}`, class: "overlay", id: "overlay", role: "img",
      "aria-label": `each word's best region in ${img.id}` });
    const fs = Math.max(h / 28, 3);
    const charW = fs * 0.62; // labels are monospace
    const placed = [];
    const perRegion = new Map();
    const labels = [];
    for (const a of shown) {
      const k = perRegion.get(a.region) || 0; // boxes of one region are offset a little
      perRegion.set(a.region, k + 1);
      const off = k * Math.max(w, h) / 90;
      const x = a.box[0] * w + off, y = a.box[1] * h + off;
      const bw = Math.max((a.box[2] - a.box[0]) * w - 2 * off, 1), bh = Math.max((a.box[3] - a.box[1]) * h - 2 * off, 1);
      const g = svgEl("g", { class: "align", "data-word": a.word });
      g.append(svgEl("rect", { x, y, width: bw, height: bh, class: "box", stroke: a.colour }));
      svg.append(g);
      const text = `${a.word} ${a.cosine.toFixed(2)}`;
      const lw = text.length * charW + fs * 0.5, lh = fs * 1.3;
      let lx = Math.min(Math.max(x, 0), w - lw), ly = Math.max(y, 0);
      // Move a label down past those it would cover.
      for (let tries = 0; tries < 40 && placed.some((p) => lx < p.x + p.w && p.x < lx + lw && ly < p.y + p.h && p.y < ly + lh); tries++) {
        ly += lh;
      }
      if (ly + lh > h) ly = Math.max(h - lh, 0);
      placed.push({ x: lx, y: ly, w: lw, h: lh });
      const label = svgEl("g", { class: "label", "data-word": a.word });
      label.append(svgEl("rect", { x: lx, y: ly, width: lw, height: lh, class: "label-bg", fill: a.colour }),
        svgEl("text", { x: lx + fs * 0.25, y: ly + fs, "font-size": fs }, text));
      labels.push(label);
    }
    svg.append(...labels); // over every box
    stage.replaceChildren(picture(img), svg);

    // The sentence, each aligned word in its box's colour.
    const words = c.text.split(/\s+/).filter((x) => x);
    const sentence = $("sentence");
    sentence.replaceChildren();
    let j = 0;
    for (const word of words) {
      const span = el("span", {}, word);
      if (j < c.alignments.length && c.alignments[j].word === word) {
        const a = c.alignments[j];
        if (a.stop_word && !showStop) span.className = "stop";
        else span.style.color = colourOf(j);
        j++;
      }
      sentence.append(span, " ");
    }
    $("score").textContent = c.score === null ? "" : `score ${c.score.toFixed(3)}`;
    $("words").replaceChildren(...shown.map((a) => {
      const swatch = el("span", { class: "swatch" });
      swatch.style.background = a.colour; // CSSOM: the page's policy allows no style attributes
      return el("li", {}, swatch, el("span", { class: "w" }, a.word),
        el("span", { class: "muted" }, ` region ${a.region}, cosine ${a.cosine.toFixed(3)}`));
    }));
  }

  async function findCaptions() {
    const img = state.current.image;
    $("findcaps").disabled = true;
    try {
      const res = await api("POST", "/api/search/image", { image_id: img.id, k: 10, explain: true });
      $("captions").replaceChildren(...res.results.map((r) => {
        const own = r.caption.image_id === img.id;
        const b = el("button", { type: "button", class: "link" + (own ? " own" : ""), title: own ? "one of this image's captions" : `a caption of ${r.caption.image_id}` },
          el("span", { class: "score" }, r.score.toFixed(3)), " ", r.caption.text, own ? " ✓" : "");
        b.addEventListener("click", () => show({ text: r.caption.text, score: r.score, alignments: r.alignments }, b));
        return el("li", {}, b);
      }));
    } catch (e) {
      $("captions").replaceChildren(el("li", { class: "error" }, e.message));
    } finally {
      $("findcaps").disabled = false;
    }
  }

  // searchPhoto finds the captions of an uploaded photo (its features
  // are extracted by the server) and lists them in the results.
  async function searchPhoto(file) {
    $("hint").hidden = true;
    setStatus(`Reading ${file.name}…`);
    $("results").replaceChildren();
    try {
      const r = await fetch("/api/search/upload?k=" + RESULTS, {
        method: "POST", headers: { "Content-Type": file.type || "application/octet-stream" }, body: file });
      let data = null;
      try { data = await r.json(); } catch (e) { /* not JSON */ }
      if (!r.ok) throw new Error((data && data.error) || `${r.status} ${r.statusText}`);
      setStatus(`${data.results.length} captions for ${file.name} (${scoringOf(data)}, ${data.ms.toFixed(1)} ms)`);
      $("results").append(el("ol", { class: "captions" }, ...data.results.map((x) =>
        el("li", {}, el("span", { class: "score" }, x.score.toFixed(3)), " ", x.caption.text,
          el("span", { class: "muted" }, ` (${x.caption.image_id})`)))));
    } catch (e) {
      setStatus(e.message, true);
    }
  }

  // The address keeps the query and the open image: #q=...&image=...
  function setHash() {
    const p = new URLSearchParams();
    if (state.query) p.set("q", state.query);
    if ($("detail").open && state.current) p.set("image", state.current.image.id);
    const h = p.toString();
    history.replaceState(null, "", h ? "#" + h : location.pathname);
  }

  async function start() {
    $("search").addEventListener("submit", (e) => {
      e.preventDefault();
      const q = $("q").value.trim();
      if (q) search(q);
    });
    $("close").addEventListener("click", () => $("detail").close());
    $("detail").addEventListener("close", () => setHash());
    $("stopwords").addEventListener("change", () => state.current && draw());
    $("findcaps").addEventListener("click", findCaptions);
    try {
      const info = await api("GET", "/api/info");
      $("info").textContent = `${info.images.toLocaleString()} images, ${info.captions.toLocaleString()} captions; ` +
        (info.fusion ? fusionOf(info.fusion) : `${info.model} (${info.scoring})`) + (info.image_files ? "" : "; no image files: regions drawn as boxes");
      $("q").maxLength = info.max_query_chars;
      if (info.image_upload) {
        $("upload").hidden = false;
        $("photo").addEventListener("change", () => {
          const f = $("photo").files[0];
          if (!f) return;
          if (f.size > info.max_upload_bytes) setStatus(`${f.name} is larger than ${info.max_upload_bytes} bytes`, true);
          else searchPhoto(f);
        });
      }
      if (info.example) {
        $("q").placeholder = `Describe an image, e.g. ${info.example}`;
        $("example").textContent = info.example;
        $("example").addEventListener("click", () => search(info.example));
        $("hint").hidden = false;
      }
    } catch (e) {
      setStatus(e.message, true);
    }
    const p = new URLSearchParams(location.hash.slice(1));
    if (p.get("q")) await search(p.get("q"));
    if (p.get("image")) await openImage(p.get("image"), null);
  }

  start();
})();
