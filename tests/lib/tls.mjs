// Throwaway certificates for TLS tests, made with the openssl command: a CA, and server
// certificates it signs for 127.0.0.1 and localhost.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

function openssl(args, cwd) {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

// A CA in a new temporary directory: {dir, caFile, ca (PEM text), issue(name, opts), remove()}.
// issue(name, {cn, serial}) writes name.pem and name.key (the server certificate and its key)
// and returns {certFile, keyFile, cert, key, serial}.
export function makeCA() {
  const dir = mkdtempSync(path.join(tmpdir(), 'smcp-tls-'));
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=sandbox-mcp test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign'], dir);
  const caFile = path.join(dir, 'ca.pem');
  return {
    dir,
    caFile,
    ca: readFileSync(caFile, 'utf8'),
    issue(name, { cn = 'localhost', serial = '1001' } = {}) {
      openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
        '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`], dir);
      writeFileSync(path.join(dir, `${name}.ext`),
        'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
      openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key',
        '-set_serial', `0x${serial}`, '-days', '2', '-extfile', `${name}.ext`, '-out', `${name}.pem`], dir);
      const certFile = path.join(dir, `${name}.pem`), keyFile = path.join(dir, `${name}.key`);
      return { certFile, keyFile, cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8'), serial };
    },
    remove() { rmSync(dir, { recursive: true, force: true }); },
  };
}
