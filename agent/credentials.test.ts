import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { TlsFingerprint } from './credentials.js';

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
