// onnx_run.js — run an exported model with ONNX Runtime (npm onnxruntime-node, CPU) over pixels
// dumped by tf_dump_pixels: uint8 [N, H, W, C] .npy in, float32 logits [N, classes] .npy out.
// The pixels go in as the model's contract says: float32 [N, C, H, W], values 0..255.
// usage: node onnx_run.js MODEL.onnx PIXELS.npy LOGITS.npy [BATCH [fixed]]
// (fixed: the model has a fixed batch of BATCH; the last, shorter batch is padded with zeros)
// The package is found through $FL_ORT_NODE_MODULES (a node_modules directory), else the
// checkout's .deps/onnxruntime/node_modules (scripts/setup.sh), else Node's own search.
// Prints one JSON line: images, seconds, images_per_sec, ort version, the model's metadata.
'use strict';
const fs = require('fs');
const path = require('path');

function loadOrt() {
    const dirs = [process.env.FL_ORT_NODE_MODULES,
                  path.join(__dirname, '..', '..', '.deps', 'onnxruntime', 'node_modules')];
    for (const d of dirs)
        if (d && fs.existsSync(path.join(d, 'onnxruntime-node'))) {
            const dir = path.join(d, 'onnxruntime-node');
            return {ort: require(dir), version: require(path.join(dir, 'package.json')).version};
        }
    return {ort: require('onnxruntime-node'), version: ''};
}

function readNpy(file) {
    const b = fs.readFileSync(file);
    if (b.readUInt32BE(0) !== 0x934e554d) throw new Error(`${file}: not a .npy file`);
    const major = b[6];
    const hl = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
    const start = major === 1 ? 10 : 12;
    const hdr = b.toString('latin1', start, start + hl);
    const descr = /'descr':\s*'([^']+)'/.exec(hdr)[1];
    const shape = /'shape':\s*\(([^)]*)\)/.exec(hdr)[1].split(',').filter(s => s.trim()).map(Number);
    if (/True/.test(/'fortran_order':\s*(\w+)/.exec(hdr)[1])) throw new Error(`${file}: Fortran order`);
    return {descr, shape, data: b.subarray(start + hl)};
}

function writeNpyF32(file, arr, shape) {
    let dict = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
    const total = 10 + dict.length + 1;
    dict += ' '.repeat((64 - total % 64) % 64) + '\n';
    const pre = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, dict.length & 0xff, dict.length >> 8]);
    fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(dict, 'latin1'),
                                          Buffer.from(arr.buffer, arr.byteOffset, arr.byteLength)]));
}

async function main() {
    const [model, pixels, out, batchArg, fixedArg] = process.argv.slice(2);
    if (!out || (fixedArg && fixedArg !== 'fixed')) {
        console.error('usage: node onnx_run.js MODEL.onnx PIXELS.npy LOGITS.npy [BATCH [fixed]]');
        process.exit(2);
    }
    const {ort, version} = loadOrt();
    const px = readNpy(pixels);
    if (px.descr !== '|u1' || px.shape.length !== 4) throw new Error(`${pixels}: want uint8 [N,H,W,C]`);
    const [N, H, W, C] = px.shape;
    const session = await ort.InferenceSession.create(model, {executionProviders: ['cpu']});
    const B = Number(batchArg || 256);
    const logits = [];
    let K = 0;
    const t0 = process.hrtime.bigint();
    for (let s = 0; s < N; s += B) {
        const n = Math.min(B, N - s);
        const bs = fixedArg ? B : n;
        const x = new Float32Array(bs * C * H * W);
        for (let i = 0; i < n; i++)
            for (let y = 0; y < H; y++)
                for (let xx = 0; xx < W; xx++)
                    for (let c = 0; c < C; c++)
                        x[((i * C + c) * H + y) * W + xx] = px.data[(((s + i) * H + y) * W + xx) * C + c];
        const r = await session.run({images: new ort.Tensor('float32', x, [bs, C, H, W])});
        const l = r.logits;
        K = l.dims[1];
        logits.push(l.data.subarray(0, n * K).slice());
    }
    const secs = Number(process.hrtime.bigint() - t0) / 1e9;
    const all = new Float32Array(N * K);
    let o = 0;
    for (const l of logits) { all.set(l, o); o += l.length; }
    writeNpyF32(out, all, [N, K]);
    console.log(JSON.stringify({images: N, classes: K, seconds: secs, images_per_sec: N / secs,
                                onnxruntime_node: version, inputs: session.inputNames,
                                outputs: session.outputNames}));
}

main().catch(e => { console.error(`onnx_run.js: ${e.message}`); process.exit(1); });
