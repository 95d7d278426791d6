// Local stand-ins for the servers ordinary tools download from, for tests that run those tools
// inside a sandbox: an npm registry, a PEP 503 Python package index and a git server (smart
// HTTP, over HTTPS with a throwaway CA) and a flat apt repository. Each listens on 127.0.0.1 on a
// random port, serves real artifacts built in-process (a gzipped tar for npm, a wheel for pip, a
// bare repository for git, a .deb made by dpkg-deb for apt) and records the requests it was sent.
// Nothing here reaches past the machine.
//
//   const npm = await startNpmRegistry();            // sandbox-mcp-fixture-dep@1.0.0
//   // in a sandbox: npm install --registry <npm.url> sandbox-mcp-fixture-dep
//   const py = await startPythonIndex();             // sandbox-mcp-fixture-py 1.0.0
//   // pip install --index-url <py.url> sandbox-mcp-fixture-py   (url ends in /simple/)
//   const git = await startGitServer();              // repo.git, one commit
//   // git -c http.sslCAInfo=<git.ca written into the sandbox> clone <git.url>/repo.git
//   const apt = await startAptRepository();          // sandbox-mcp-fixture-deb 1.0.0
//   // sources.list: deb [trusted=yes] <apt.url> ./   then apt-get update, apt-get install
//
// The URLs name `localhost` (name: to change it), the name a sandbox's egress proxy resolves
// on the host; localhostAddrs() gives what it resolves to, for SANDBOX_NETWORK_ADDRS. host: listen
// on another loopback address (127.0.0.2), which the URLs then name instead: a sandbox's NO_PROXY
// lists localhost and 127.0.0.1 (its own loopback), so tools reach such a server through the
// proxy as they are, as they would a registry elsewhere.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { chmodSync, mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';

import { gitHttpBackend } from './git.mjs';
import { makeCA } from './tls.mjs';

// --- archives ---

// A ustar archive of files ({path: content}), each under prefix (npm wants "package/").
export function tar(files, prefix = '') {
  const blocks = [];
  for (const [name, content] of Object.entries(files)) {
    const data = Buffer.from(content);
    const full = prefix + name;
    if (Buffer.byteLength(full) > 100) throw new Error(`tar: name too long: ${full}`);
    const h = Buffer.alloc(512);
    const put = (s, off, len) => h.write(s, off, len, 'latin1');
    const octal = (n, len) => n.toString(8).padStart(len - 1, '0') + '\0';
    put(full, 0, 100);
    put(octal(0o644, 8), 100, 8);
    put(octal(0, 8), 108, 8);
    put(octal(0, 8), 116, 8);
    put(octal(data.length, 12), 124, 12);
    put(octal(1700000000, 12), 136, 12);
    put('        ', 148, 8);
    put('0', 156, 1);
    put('ustar\u000000', 257, 8);
    let sum = 0;
    for (const b of h) sum += b;
    put(sum.toString(8).padStart(6, '0') + '\0 ', 148, 8);
    blocks.push(h, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// A zip archive of files ({path: content}), deflated.
export function zip(files) {
  const locals = [], centrals = [];
  let offset = 0;
  // 1 January 2024, 00:00, in DOS form
  const time = 0, date = ((2024 - 1980) << 9) | (1 << 5) | 1;
  for (const [name, content] of Object.entries(files)) {
    const data = Buffer.from(content);
    const packed = zlib.deflateRawSync(data);
    const fname = Buffer.from(name);
    const crc = crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6); // names are UTF-8
    local.writeUInt16LE(8, 8);
    local.writeUInt16LE(time, 10);
    local.writeUInt16LE(date, 12);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(packed.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(fname.length, 26);
    local.writeUInt16LE(0, 28);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE((3 << 8) | 20, 4); // made on Unix
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x0800, 8);
    central.writeUInt16LE(8, 10);
    central.writeUInt16LE(time, 12);
    central.writeUInt16LE(date, 14);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(packed.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(fname.length, 28);
    central.writeUInt32LE(((0o100644 << 16) >>> 0), 38);
    central.writeUInt32LE(offset, 42);
    locals.push(local, fname, packed);
    centrals.push(central, fname);
    offset += local.length + fname.length + packed.length;
  }
  const cd = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(centrals.length / 2, 8);
  end.writeUInt16LE(centrals.length / 2, 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, end]);
}

// --- the servers' common part ---

// Which addresses `localhost` resolves to here, for SANDBOX_NETWORK_ADDRS: the egress proxy
// resolves names on the host and wants every address allowed.
export async function localhostAddrs() {
  return [...new Set((await lookup('localhost', { all: true })).map((a) => a.address))];
}

// SANDBOX_NETWORK_ALLOW and SANDBOX_NETWORK_ADDRS entries that open exactly these ports of
// localhost: {allow, addrs}.
export async function allowLocalhost(ports) {
  const addrs = await localhostAddrs();
  return {
    allow: ports.map((p) => `localhost:${p}`).join(','),
    addrs: ports.flatMap((p) => addrs.map((a) => (a.includes(':') ? `[${a}]:${p}` : `${a}:${p}`))).join(','),
  };
}

async function listen(handler, { tls, host = '127.0.0.1', name = host === '127.0.0.1' ? 'localhost' : host } = {}) {
  const requests = [];
  const wrapped = (req, res) => {
    requests.push({ method: req.method, url: req.url, headers: req.headers });
    handler(req, res);
  };
  const srv = tls ? https.createServer({ cert: tls.cert, key: tls.key }, wrapped) : http.createServer(wrapped);
  await new Promise((resolve, reject) => { srv.once('error', reject); srv.listen(0, host, resolve); });
  const port = srv.address().port;
  return {
    srv, port, requests,
    origin: `${tls ? 'https' : 'http'}://${name}:${port}`,
    close: () => new Promise((resolve) => { srv.closeAllConnections(); srv.close(() => resolve()); }),
  };
}

function send(res, status, type, body) {
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

// The origin a client asked for (its Host header, which a proxy passes on), so that links in
// metadata lead back the way the client came.
function originOf(req, fallback) {
  return req.headers.host ? `${fallback.split('://')[0]}://${req.headers.host}` : fallback;
}

// --- npm ---

// The package a test that needs "some dependency" can install: a left-pad.
export const NPM_FIXTURE = {
  name: 'sandbox-mcp-fixture-dep',
  version: '1.0.0',
  files: {
    'index.js': "'use strict';\n" +
      '// Pads s on the left with c (a space by default) to n characters.\n' +
      "module.exports = function leftPad(s, n, c = ' ') {\n" +
      '  s = String(s);\n' +
      '  return s.length >= n ? s : String(c).repeat(n - s.length) + s;\n' +
      '};\n',
  },
};

// A registry serving packages: [{name, version, files: {path: content}, dependencies?, bin?}]
// (bin: {command: path}, as in package.json; package.json is made unless files has one;
// several entries of one name are its versions, the last being "latest"). Packuments at /<name>
// (scoped: /@scope%2fname), tarballs at /<name>/-/<basename>-<version>.tgz, with sha1 shasum
// and sha512 integrity as npm checks them.
// Resolves {url (ends in /), port, close(), requests, packages: [{name, version, tarball,
// integrity, shasum}]}; anything else answers 404 {"error": "Not found"}.
export async function startNpmRegistry({ packages = [NPM_FIXTURE], name, host } = {}) {
  const byName = new Map();
  const built = [];
  for (const p of packages) {
    const manifest = {
      name: p.name, version: p.version, main: 'index.js', license: 'MIT',
      description: p.description || `${p.name}, served by a test registry`,
      ...(p.dependencies ? { dependencies: p.dependencies } : {}),
      ...(p.bin ? { bin: p.bin } : {}),
    };
    const files = { 'package.json': `${JSON.stringify(manifest, null, 2)}\n`, ...p.files };
    const tgz = zlib.gzipSync(tar(files, 'package/'));
    const base = p.name.split('/').pop();
    const file = `${base}-${p.version}.tgz`;
    const entry = {
      manifest: JSON.parse(files['package.json']), tgz, file,
      integrity: `sha512-${createHash('sha512').update(tgz).digest('base64')}`,
      shasum: createHash('sha1').update(tgz).digest('hex'),
    };
    if (!byName.has(p.name)) byName.set(p.name, []);
    byName.get(p.name).push(entry);
    built.push(entry);
  }
  const s = await listen((req, res) => {
    const origin = originOf(req, s.origin);
    const p = decodeURIComponent(new URL(req.url, 'http://x').pathname).replace(/^\/+/, '');
    const tm = p.match(/^(.+)\/-\/([^/]+\.tgz)$/);
    if (req.method === 'GET' && tm && byName.has(tm[1])) {
      const e = byName.get(tm[1]).find((x) => x.file === tm[2]);
      if (e) {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': e.tgz.length });
        return res.end(e.tgz);
      }
    }
    if (req.method === 'GET' && byName.has(p)) {
      const versions = byName.get(p);
      const doc = {
        _id: p, name: p,
        'dist-tags': { latest: versions.at(-1).manifest.version },
        versions: Object.fromEntries(versions.map((e) => [e.manifest.version, {
          ...e.manifest, _id: `${p}@${e.manifest.version}`,
          dist: { tarball: `${origin}/${p}/-/${e.file}`, shasum: e.shasum, integrity: e.integrity },
        }])),
        time: Object.fromEntries(versions.map((e) => [e.manifest.version, '2024-01-01T00:00:00.000Z'])),
      };
      return send(res, 200, 'application/json', JSON.stringify(doc));
    }
    send(res, 404, 'application/json', '{"error":"Not found"}');
  }, { name, host });
  return {
    url: `${s.origin}/`, port: s.port, close: s.close, requests: s.requests,
    packages: built.map((e) => ({ name: e.manifest.name, version: e.manifest.version,
      tarball: `${s.origin}/${e.manifest.name}/-/${e.file}`, integrity: e.integrity, shasum: e.shasum })),
  };
}

// --- Python ---

export const PY_FIXTURE = {
  name: 'sandbox-mcp-fixture-py',
  version: '1.0.0',
  files: {
    'sandbox_mcp_fixture_py/__init__.py':
      '"""A package served by a test index."""\n\n\n' +
      'def left_pad(s, n, c=" "):\n' +
      '    s = str(s)\n' +
      '    return s if len(s) >= n else c * (n - len(s)) + s\n',
  },
};

// PEP 503 normalized project name.
export const normalize = (n) => n.toLowerCase().replace(/[-_.]+/g, '-');

// A pure-Python wheel of {name, version, files: {path: content}, requires?, scripts?}
// (scripts: {command: "module:function"}, console scripts pip makes on installing):
// {filename, data, sha256}.
export function wheel({ name, version, files, requires = [], scripts }) {
  const dist = name.replace(/[-_.]+/g, '_');
  const info = `${dist}-${version}.dist-info`;
  const all = {
    ...files,
    [`${info}/METADATA`]: `Metadata-Version: 2.1\nName: ${name}\nVersion: ${version}\n` +
      `Summary: ${name}, served by a test index\n${requires.map((r) => `Requires-Dist: ${r}\n`).join('')}`,
    [`${info}/WHEEL`]: 'Wheel-Version: 1.0\nGenerator: sandbox-mcp-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n',
    ...(scripts ? { [`${info}/entry_points.txt`]: '[console_scripts]\n' +
      Object.entries(scripts).map(([c, f]) => `${c} = ${f}\n`).join('') } : {}),
  };
  const hash = (c) => createHash('sha256').update(c).digest('base64url');
  all[`${info}/RECORD`] = Object.entries(all)
    .map(([p, c]) => `${p},sha256=${hash(c)},${Buffer.byteLength(c)}\n`).join('') + `${info}/RECORD,,\n`;
  const data = zip(all);
  return { filename: `${dist}-${version}-py3-none-any.whl`, data, sha256: createHash('sha256').update(data).digest('hex') };
}

// A PEP 503 simple index of packages ([{name, version, files, requires?, scripts?}], each made
// into a wheel): /simple/ lists the projects, /simple/<normalized>/ links each wheel (with its
// #sha256=, which pip checks), wheels at /packages/<filename>. Resolves {url (…/simple/), port,
// close(), requests, wheels: [{name, version, filename, sha256}]}.
export async function startPythonIndex({ packages = [PY_FIXTURE], name, host } = {}) {
  const projects = new Map();
  const files = new Map();
  const wheels = [];
  for (const p of packages) {
    const w = wheel(p);
    const key = normalize(p.name);
    if (!projects.has(key)) projects.set(key, []);
    projects.get(key).push(w);
    files.set(w.filename, w.data);
    wheels.push({ name: p.name, version: p.version, filename: w.filename, sha256: w.sha256 });
  }
  const page = (title, links) => '<!DOCTYPE html>\n<html><head><meta name="pypi:repository-version" content="1.0">' +
    `<title>${title}</title></head><body>\n${links.join('<br>\n')}\n</body></html>\n`;
  const s = await listen((req, res) => {
    const p = new URL(req.url, 'http://x').pathname;
    if (req.method !== 'GET') return send(res, 405, 'text/plain', 'method not allowed\n');
    if (p === '/simple/')
      return send(res, 200, 'text/html', page('Simple index', [...projects.keys()].map((k) => `<a href="${k}/">${k}</a>`)));
    const m = p.match(/^\/simple\/([^/]+)\/?$/);
    if (m) {
      const key = normalize(m[1]);
      if (key !== m[1] || !p.endsWith('/')) { // the canonical address, as PyPI does
        res.writeHead(301, { location: `/simple/${key}/` });
        return res.end();
      }
      if (projects.has(key))
        return send(res, 200, 'text/html', page(`Links for ${key}`, projects.get(key)
          .map((w) => `<a href="../../packages/${w.filename}#sha256=${w.sha256}">${w.filename}</a>`)));
    }
    const f = p.match(/^\/packages\/([^/]+)$/);
    if (f && files.has(f[1])) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': files.get(f[1]).length });
      return res.end(files.get(f[1]));
    }
    send(res, 404, 'text/plain', 'not found\n');
  }, { name, host });
  return { url: `${s.origin}/simple/`, port: s.port, close: s.close, requests: s.requests, wheels };
}

// --- git ---

export const GIT_FIXTURE = {
  'README.md': '# fixture\n\nServed by a test git server.\n',
  'hello.sh': '#!/bin/sh\necho hello from the fixture repository\n',
};

const GIT_ENV = {
  GIT_AUTHOR_NAME: 'Fixture', GIT_AUTHOR_EMAIL: 'fixture@example.invalid',
  GIT_COMMITTER_NAME: 'Fixture', GIT_COMMITTER_EMAIL: 'fixture@example.invalid',
  GIT_AUTHOR_DATE: '2024-01-01T00:00:00Z', GIT_COMMITTER_DATE: '2024-01-01T00:00:00Z',
  GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1',
};

function git(args, cwd) {
  const r = spawnSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, ...GIT_ENV } });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

// A git server speaking smart HTTP (git http-backend as CGI) over HTTPS with a certificate for
// localhost and 127.0.0.1 from a throwaway CA. repos: {"name.git": {files, message}}, each made
// a bare repository with one commit on main. Resolves {url (no trailing /), port, ca (PEM text
// to trust), close(), requests, repos: {"name.git": commit sha}}. tls: false serves plain HTTP.
export async function startGitServer({ repos = { 'repo.git': { files: GIT_FIXTURE, message: 'fixture commit' } },
  tls = true, name, host } = {}) {
  const root = mkdtempSync(path.join(tmpdir(), 'smcp-gitsrv-'));
  const shas = {};
  for (const [repo, { files, message = 'fixture commit' }] of Object.entries(repos)) {
    const work = path.join(root, '.work', repo);
    mkdirSync(work, { recursive: true });
    git(['init', '-q', '-b', 'main', work]);
    for (const [f, content] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(work, f)), { recursive: true });
      writeFileSync(path.join(work, f), content);
    }
    git(['add', '-A'], work);
    git(['commit', '-q', '-m', message], work);
    git(['clone', '-q', '--bare', work, path.join(root, repo)]);
    shas[repo] = git(['rev-parse', 'HEAD'], work).trim();
  }
  rmSync(path.join(root, '.work'), { recursive: true, force: true });
  const ca = tls ? makeCA() : null;
  const cert = ca?.issue('git');
  const s = await listen((req, res) => {
    gitHttpBackend(req, res, root);
  }, { tls: cert, name, host });
  return {
    url: s.origin, port: s.port, requests: s.requests, repos: shas, ca: ca?.ca ?? null,
    close: async () => { await s.close(); ca?.remove(); rmSync(root, { recursive: true, force: true }); },
  };
}

// --- apt ---

export const DEB_FIXTURE = {
  name: 'sandbox-mcp-fixture-deb',
  version: '1.0.0',
  files: {
    'usr/bin/sandbox-mcp-fixture-deb': '#!/bin/sh\necho "hello from the fixture package: $*"\n',
  },
};

// A binary package of {name, version, files: {path: content}, depends?} for every architecture,
// built by dpkg-deb (files under bin/ and sbin/ directories executable, everything owned by
// root): {name, version, filename, data, control (its stanza: the control file's fields),
// sha256, md5}.
export function deb({ name, version, files, depends }) {
  const control = `Package: ${name}\nVersion: ${version}\nArchitecture: all\n` +
    'Maintainer: sandbox-mcp tests <fixture@example.invalid>\nSection: misc\nPriority: optional\n' +
    (depends ? `Depends: ${depends}\n` : '') +
    `Description: ${name}, served by a test repository\n Nothing but a fixture.\n`;
  const dir = mkdtempSync(path.join(tmpdir(), 'smcp-deb-'));
  try {
    const root = path.join(dir, 'root');
    const put = (rel, content, mode) => {
      const full = path.join(root, rel);
      for (let d = path.dirname(full); d.startsWith(root); d = path.dirname(d)) {
        mkdirSync(d, { recursive: true });
        chmodSync(d, 0o755); // dpkg-deb wants 0755 on DEBIAN, and the tree lands as built
      }
      writeFileSync(full, content);
      chmodSync(full, mode);
    };
    put('DEBIAN/control', control, 0o644);
    for (const [f, content] of Object.entries(files))
      put(f, content, /(^|\/)s?bin\/[^/]+$/.test(f) ? 0o755 : 0o644);
    const filename = `${name}_${version}_all.deb`;
    const r = spawnSync('dpkg-deb', ['--root-owner-group', '-Zgzip', '--build', root, path.join(dir, filename)],
      { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`dpkg-deb --build: ${r.error?.message ?? r.stderr}`);
    const data = readFileSync(path.join(dir, filename));
    return {
      name, version, filename, data, control,
      sha256: createHash('sha256').update(data).digest('hex'),
      md5: createHash('md5').update(data).digest('hex'),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// A flat apt repository (the "deb URL ./" form, no dists/) of packages ([{name, version, files,
// depends?}], each built with deb()): /Release lists /Packages and /Packages.gz with their sizes
// and SHA256 sums, which apt checks; the .deb files sit at the top. It is unsigned (no InRelease,
// no Release.gpg: both 404), so the sources entry says [trusted=yes]. Resolves {url (ends in /),
// port, close(), requests, debs: [{name, version, filename, sha256}]}.
export async function startAptRepository({ packages = [DEB_FIXTURE], name, host } = {}) {
  const debs = packages.map(deb);
  const index = debs.map((d) => `${d.control.replace(/\n$/, '')}\nFilename: ./${d.filename}\n` +
    `Size: ${d.data.length}\nMD5sum: ${d.md5}\nSHA256: ${d.sha256}\n`).join('\n');
  const files = new Map([['Packages', Buffer.from(index)], ['Packages.gz', zlib.gzipSync(index)]]);
  const sum = (b) => createHash('sha256').update(b).digest('hex');
  const release = 'Origin: sandbox-mcp tests\nLabel: sandbox-mcp tests\n' +
    'Date: Mon, 01 Jan 2024 00:00:00 UTC\nSHA256:\n' +
    [...files].map(([f, b]) => ` ${sum(b)} ${String(b.length).padStart(8)} ${f}\n`).join('');
  files.set('Release', Buffer.from(release));
  for (const d of debs) files.set(d.filename, d.data);
  const s = await listen((req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'text/plain', 'method not allowed\n');
    // apt asks for <url>./Release: the path as given, dot segments resolved
    const p = path.posix.normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^\/+/, '');
    const body = files.get(p);
    if (!body) return send(res, 404, 'text/plain', 'not found\n');
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length });
    res.end(req.method === 'HEAD' ? undefined : body);
  }, { name, host });
  return {
    url: `${s.origin}/`, port: s.port, close: s.close, requests: s.requests,
    debs: debs.map(({ name: n, version, filename, sha256 }) => ({ name: n, version, filename, sha256 })),
  };
}
