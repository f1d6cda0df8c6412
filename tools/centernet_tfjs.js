// Runs the CenterNet TF.js graph model (centernet.json + centernet.bin) with
// @tensorflow/tfjs and its pure-JavaScript CPU backend: the reference runtime
// that package detect's Go network is checked against (detect's cross-check
// test) and timed beside (xmr bench extract).
//
// Usage:
//   node tools/centernet_tfjs.js --modules DIR --model DIR --input A.f32,B.f32 \
//        --outputs name,name --out DIR   # writes K_NAME.f32 per input K + outputs.json
//   node tools/centernet_tfjs.js --modules DIR --model DIR --bench N
//
// --modules is a folder holding node_modules/@tensorflow/tfjs (npm install
// outside the repository). The input is 512*512*3 little-endian float32
// values, HWC, 0..255. Output tensors are written as little-endian float32.
'use strict';
const fs = require('fs');
const path = require('path');
const { createRequire } = require('module');

function args() {
  const a = {};
  const v = process.argv.slice(2);
  for (let i = 0; i < v.length; i += 2) {
    if (!v[i].startsWith('--') || i + 1 >= v.length) throw new Error(`bad argument ${v[i]}`);
    a[v[i].slice(2)] = v[i + 1];
  }
  return a;
}

async function main() {
  const a = args();
  if (!a.modules || !a.model) throw new Error('need --modules and --model');
  const req = createRequire(path.join(path.resolve(a.modules), 'package.json'));
  const tf = req('@tensorflow/tfjs');
  await tf.setBackend('cpu');
  await tf.ready();
  const json = JSON.parse(fs.readFileSync(path.join(a.model, 'centernet.json'), 'utf8'));
  const specs = [];
  const bufs = [];
  for (const g of json.weightsManifest) {
    specs.push(...g.weights);
    for (const p of g.paths) bufs.push(fs.readFileSync(path.join(a.model, p)));
  }
  const all = Buffer.concat(bufs);
  const weightData = all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength);
  const model = await tf.loadGraphModel(tf.io.fromMemory({
    modelTopology: json.modelTopology, weightSpecs: specs, weightData,
    format: json.format, generatedBy: json.generatedBy, convertedBy: json.convertedBy,
    signature: json.signature,
  }));
  const N = 512;
  if (a.bench) {
    const n = parseInt(a.bench, 10);
    const x = tf.randomUniform([1, N, N, 3], 0, 255);
    const outs = ['tower_0/detections'];
    tf.dispose(model.execute(x, outs)); // warm-up
    const t0 = process.hrtime.bigint();
    const c0 = process.cpuUsage();
    for (let i = 0; i < n; i++) {
      const r = model.execute(x, outs);
      await r.data();
      tf.dispose(r);
    }
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    const c = process.cpuUsage(c0);
    process.stdout.write(JSON.stringify({ images: n, seconds: s, cpu_seconds: (c.user + c.system) / 1e6,
      backend: tf.getBackend(), tfjs: tf.version.tfjs }) + '\n');
    return;
  }
  if (!a.input || !a.outputs || !a.out) throw new Error('need --input, --outputs and --out');
  const names = a.outputs.split(',');
  const meta = { backend: tf.getBackend(), tfjs: tf.version.tfjs, inputs: [] };
  const inputs = a.input.split(',');
  for (let k = 0; k < inputs.length; k++) {
    const raw = fs.readFileSync(inputs[k]);
    if (raw.length !== N * N * 3 * 4) throw new Error(`${inputs[k]}: ${raw.length} bytes, want ${N * N * 3 * 4}`);
    const x = tf.tensor4d(new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length)), [1, N, N, 3]);
    let res = model.execute(x, names);
    if (!Array.isArray(res)) res = [res];
    const outs = [];
    for (let i = 0; i < names.length; i++) {
      const data = await res[i].data();
      const file = `${k}_` + names[i].replace(/[^A-Za-z0-9_.-]/g, '_') + '.f32';
      const f32 = Float32Array.from(data);
      fs.writeFileSync(path.join(a.out, file), Buffer.from(f32.buffer));
      outs.push({ name: names[i], shape: res[i].shape, file });
    }
    tf.dispose([x, ...res]);
    meta.inputs.push({ input: inputs[k], outputs: outs });
  }
  fs.writeFileSync(path.join(a.out, 'outputs.json'), JSON.stringify(meta));
}

main().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
