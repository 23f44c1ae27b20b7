import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { makePki } from '../test/support/certs.js';
import { CredentialLoader, TlsFingerprint, tlsFilesProblem } from './credentials.js';

const dirs: string[] = [];
const tempDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'fp-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('TlsFingerprint', () => {
  it('stays while the files are untouched and changes on an in-place write of the same size', () => {
    const dir = tempDir();
    const files = {
      caCert: join(dir, 'ca.crt'),
      agentCert: join(dir, 'tls.crt'),
      agentKey: join(dir, 'tls.key'),
      serviceAccountTokenPath: '',
    };
    for (const f of [files.caCert, files.agentCert, files.agentKey]) writeFileSync(f, 'aaaa');
    const fp = new TlsFingerprint(files);
    const first = fp.current();
    expect(fp.current()).toBe(first);
    writeFileSync(files.agentKey, 'bbbb');
    expect(fp.current()).not.toBe(first);
  });

  it('follows a Secret volume update (the ..data symlink swapped to a new directory)', () => {
    const dir = tempDir();
    const generation = (name: string, content: string) => {
      mkdirSync(join(dir, name));
      for (const f of ['ca.crt', 'tls.crt', 'tls.key']) writeFileSync(join(dir, name, f), content);
    };
    generation('v1', 'one');
    symlinkSync('v1', join(dir, '..data'));
    for (const f of ['ca.crt', 'tls.crt', 'tls.key']) symlinkSync(join('..data', f), join(dir, f));
    const fp = new TlsFingerprint({
      caCert: join(dir, 'ca.crt'),
      agentCert: join(dir, 'tls.crt'),
      agentKey: join(dir, 'tls.key'),
      serviceAccountTokenPath: '',
    });
    const first = fp.current();
    generation('v2', 'two');
    symlinkSync('v2', join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
    expect(fp.current()).not.toBe(first);
  });

  it('throws while a file is missing, and recovers when it is back', () => {
    const dir = tempDir();
    const files = { caCert: join(dir, 'ca.crt'), agentCert: '', agentKey: '', serviceAccountTokenPath: '' };
    const fp = new TlsFingerprint(files);
    expect(() => fp.current()).toThrow(/ENOENT/);
    writeFileSync(files.caCert, 'x');
    expect(fp.current()).toMatch(/^[0-9a-f]{16}$/);
  });
});

describe('a CA bundle with a malformed block', () => {
  const pki = makePki();
  const good = readFileSync(pki.caCert, 'utf8');
  const broken = `${good}-----BEGIN CERTIFICATE-----\nTm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n`;
  const files = (caCert: string) => ({
    caCert,
    agentCert: pki.clientCert,
    agentKey: pki.clientKey,
    serviceAccountTokenPath: '',
  });

  it('is an error at start that names the file and the block (not a bundle short of a CA)', () => {
    const dir = tempDir();
    const path = join(dir, 'ca.crt');
    writeFileSync(path, broken);
    expect(tlsFilesProblem(files(path))).toMatch(new RegExp(`^--ca-cert=${path}: certificate 2 of 2 is malformed`));
    writeFileSync(path, `${good}-----BEGIN CERTIFICATE-----\nMIIB\n`);
    expect(tlsFilesProblem(files(path))).toMatch(/certificate 2: BEGIN CERTIFICATE without its END CERTIFICATE/);
    writeFileSync(path, good);
    expect(tlsFilesProblem(files(path))).toBeUndefined();
  });

  it('rotated in, leaves the last good material in force, said once in the log, and again when fixed', () => {
    const dir = tempDir();
    const path = join(dir, 'ca.crt');
    writeFileSync(path, good);
    const lines: Array<{ msg: string; problem?: string }> = [];
    const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const loader = new CredentialLoader(files(path), log);
    const first = loader.generation;
    expect(first).toMatch(/^[0-9a-f]{16}$/);
    expect(loader.load('127.0.0.1:1', '127.0.0.1').tls).toBeDefined();

    writeFileSync(path, broken);
    expect(loader.generation).toBe(first);
    const credentials = loader.load('127.0.0.1:1', '127.0.0.1');
    expect(credentials.tls).toBeDefined();
    expect(loader.generation).toBe(first);
    const warnings = lines.filter((l) => l.msg.includes('keeping the last good ones'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.problem).toMatch(new RegExp(`--ca-cert=${path}: certificate 2 of 2 is malformed`));

    // A second CA appended, well formed: the new bundle is in force.
    const other = readFileSync(makePki().caCert, 'utf8');
    writeFileSync(path, `${good}${other}`);
    expect(loader.generation).not.toBe(first);
    expect(lines.filter((l) => l.msg.includes('valid again'))).toHaveLength(1);
  });

  it('with no good material ever read, an attempt fails saying why', () => {
    const dir = tempDir();
    const path = join(dir, 'ca.crt');
    writeFileSync(path, broken);
    const loader = new CredentialLoader(files(path), pino({ level: 'silent' }));
    expect(loader.generation).toBe('unreadable');
    expect(() => loader.load('127.0.0.1:1', '127.0.0.1')).toThrow(/--ca-cert=.*certificate 2 of 2 is malformed/);
  });
});
