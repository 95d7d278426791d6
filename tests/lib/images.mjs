// Small image files built here, each one its format's decoders take: a PNG deflated by zlib
// with its chunks' CRCs, a baseline JPEG, a GIF with its LZW data and a lossless WebP. For the
// tests that read images back through container_file_read.
import { crc32, deflateSync } from 'node:zlib';

function pngChunk(type, data) {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])));
  return Buffer.concat([head, data, crc]);
}

// A width x height RGB PNG: a gradient, or with noise pixels that do not compress (so the file
// is about 3 bytes a pixel). With size, a tEXt comment pads the file to exactly that many bytes.
export function png(width, height, { noise = false, size } = {}) {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8); // 8 bits, RGB, deflate, no filter method, no interlace
  const rows = Buffer.alloc(height * (1 + 3 * width));
  let seed = 12345;
  for (let y = 0, o = 0; y < height; y++) {
    rows[o++] = 0; // filter: none
    for (let x = 0; x < width; x++) {
      for (let c = 0; c < 3; c++) {
        seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
        rows[o++] = noise ? seed >>> 24 : c === 0 ? (x * 255) / width : c === 1 ? (y * 255) / height : 128;
      }
    }
  }
  const parts = [Buffer.from('\x89PNG\r\n\x1a\n', 'latin1'), pngChunk('IHDR', ihdr),
    pngChunk('IDAT', deflateSync(rows))];
  const end = pngChunk('IEND', Buffer.alloc(0));
  const have = parts.reduce((n, p) => n + p.length, 0) + end.length;
  if (size !== undefined) {
    const text = size - have - 12 - 'Comment\0'.length;
    if (text < 0) throw new Error(`a ${width}x${height} PNG takes ${have} bytes, more than ${size}`);
    parts.push(pngChunk('tEXt', Buffer.from(`Comment\0${'x'.repeat(text)}`, 'latin1')));
  }
  return Buffer.concat([...parts, end]);
}

// An 8x8 grey baseline JPEG: one block whose only coefficient is a DC of 0, coded with
// one-symbol Huffman tables.
export function jpeg() {
  const seg = (marker, body) => {
    const len = Buffer.alloc(2);
    len.writeUInt16BE(body.length + 2);
    return Buffer.concat([Buffer.from([0xff, marker]), len, Buffer.from(body)]);
  };
  const oneSymbol = (tableClass) => [tableClass, 1, ...Array(15).fill(0), 0x00];
  return Buffer.concat([
    Buffer.from([0xff, 0xd8]), // SOI
    seg(0xe0, [...Buffer.from('JFIF\0', 'latin1'), 1, 1, 0, 0, 1, 0, 1, 0, 0]),
    seg(0xdb, [0, ...Array(64).fill(1)]), // quantization table 0: all 1
    seg(0xc0, [8, 0, 8, 0, 8, 1, 1, 0x11, 0]), // 8x8, one component
    seg(0xc4, oneSymbol(0x00)), // DC table 0: category 0 is "0"
    seg(0xc4, oneSymbol(0x10)), // AC table 0: end of block is "0"
    seg(0xda, [1, 1, 0x00, 0, 63, 0]),
    Buffer.from([0x3f]), // "0" (DC difference 0), "0" (end of block), padded with ones
    Buffer.from([0xff, 0xd9]), // EOI
  ]);
}

// A 1x1 GIF89a: a two-colour table, one image whose LZW data is clear, pixel 0, end.
export function gif() {
  return Buffer.from([
    ...Buffer.from('GIF89a', 'latin1'), 1, 0, 1, 0, 0x80, 0, 0, // screen, global table of 2
    0, 0, 0, 255, 255, 255,
    0x2c, 0, 0, 0, 0, 1, 0, 1, 0, 0, // image descriptor
    2, 2, 0x44, 0x01, 0, // LZW minimum code size 2, one sub-block of 2 bytes
    0x3b, // trailer
  ]);
}

// A 1x1 lossless WebP (VP8L).
export function webp() {
  const vp8l = Buffer.from([0x2f, 0, 0, 0, 0x10, 0x07, 0x10, 0x11, 0x11, 0x88, 0x88, 0xfe, 0x07]);
  const chunk = Buffer.concat([Buffer.from('VP8L', 'latin1'), Buffer.from([vp8l.length, 0, 0, 0]), vp8l,
    Buffer.alloc(vp8l.length % 2)]);
  const size = Buffer.alloc(4);
  size.writeUInt32LE(4 + chunk.length);
  return Buffer.concat([Buffer.from('RIFF', 'latin1'), size, Buffer.from('WEBP', 'latin1'), chunk]);
}

// An SVG as matplotlib writes one: an XML declaration and a doctype before the <svg> element.
export function svg() {
  return Buffer.from('<?xml version="1.0" encoding="utf-8" standalone="no"?>\n'
    + '<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n'
    + '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="30" viewBox="0 0 40 30">\n'
    + '  <rect width="40" height="30" fill="#fff"/>\n  <path d="M 2 28 L 20 10 L 38 16" stroke="#1f77b4" fill="none"/>\n'
    + '</svg>\n');
}
