// The documentation stays true: the generated tables of the component READMEs match the code
// (`npm run docs`), every metric the agent registers is in some component's table, every source file
// has a line in its folder README's table of files (and every file tabled exists), every README's
// local links resolve, the front door stays a front door, CONTRIBUTING.md's layout lists every
// folder with the floor its imports run down from, and its Words name every exported class of agent/ and hub/.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { components, generated } from '../cmd/docs.js';
import { repoRoot } from './support/processes.js';

const read = (path: string) => readFileSync(join(repoRoot, path), 'utf8');

/** Every Markdown file of the repository outside node_modules and generated results. */
function markdownFiles(dir = ''): string[] {
  return readdirSync(join(repoRoot, dir), { withFileTypes: true }).flatMap((e) => {
    const path = dir ? `${dir}/${e.name}` : e.name;
    if (e.isDirectory())
      return ['node_modules', '.git', 'dist', 'build', 'results'].includes(e.name) ? [] : markdownFiles(path);
    return e.name.endsWith('.md') ? [path] : [];
  });
}

describe('component READMEs', () => {
  it.each(components.map((c) => [c.readme, c] as const))('%s has the tables `npm run docs` writes', (readme, c) => {
    const text = read(readme);
    expect(text, `${readme} is stale: run npm run docs`).toBe(generated(c, text));
  });

  it('every folder with code has a README', () => {
    const folders = readdirSync(repoRoot, { withFileTypes: true })
      .filter((e) => e.isDirectory() && !e.name.startsWith('.') && !['node_modules', 'dist', 'build'].includes(e.name))
      .map((e) => e.name)
      .filter((name) => readdirSync(join(repoRoot, name)).some((f) => f.endsWith('.ts')));
    for (const folder of folders)
      expect(existsSync(join(repoRoot, folder, 'README.md')), `${folder}/README.md`).toBe(true);
  });

  it('the metrics tables name more than a few metrics, each once', () => {
    const names = components.flatMap((c) => Object.values(c.metrics ?? {}).map((m) => m.name));
    expect(names.length).toBeGreaterThan(40);
    expect(new Set(names).size).toBe(names.length);
  });
});

/** Every .ts file of `dir` and below that is not a test, from the repository's root. */
function sourceFiles(dir: string): string[] {
  return readdirSync(join(repoRoot, dir), { withFileTypes: true }).flatMap((e) => {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory()) return ['node_modules', 'results'].includes(e.name) ? [] : sourceFiles(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') ? [path] : [];
  });
}

/** The folders of the repository's root that hold code. */
const codeFolders = readdirSync(repoRoot, { withFileTypes: true })
  .filter((e) => e.isDirectory() && !e.name.startsWith('.') && !['node_modules', 'dist', 'build'].includes(e.name))
  .map((e) => e.name)
  .filter((name) => sourceFiles(name).length > 0);

/** The README that is `file`'s contract: the nearest one up from its folder. */
function readmeOf(file: string): string {
  for (let dir = dirname(file); dir !== '.'; dir = dirname(dir))
    if (existsSync(join(repoRoot, dir, 'README.md'))) return `${dir}/README.md`;
  throw new Error(`no README.md above ${file}`);
}

/**
 * The `.ts` paths a README's table rows name in a cell before their last (the last says what they
 * hold), relative to its folder.
 */
function filesTabled(readme: string): string[] {
  return read(readme)
    .split('\n')
    .filter((line) => line.startsWith('|'))
    .flatMap((line) =>
      line
        .split('|')
        .slice(1, -2)
        .flatMap((cell) => [...cell.matchAll(/`([\w./-]+\.ts)`/g)].map((m) => m[1]!)),
    );
}

describe('file tables', () => {
  it.each(codeFolders)("%s: every source file has a line in its README's table of files", (folder) => {
    const missing = sourceFiles(folder).filter((file) => {
      const readme = readmeOf(file);
      return !filesTabled(readme).includes(relative(dirname(readme), file));
    });
    expect(missing, 'a row `| `file.ts` | what it holds |` in the README of its folder').toEqual([]);
  });

  it.each(codeFolders)('%s: every file its README tables exists', (folder) => {
    const readmes = [...new Set(sourceFiles(folder).map(readmeOf))];
    for (const readme of readmes)
      for (const file of filesTabled(readme))
        expect(
          existsSync(join(repoRoot, dirname(readme), file)) || existsSync(join(repoRoot, file)),
          `${readme} -> ${file}`,
        ).toBe(true);
  });
});

describe('links', () => {
  it.each(markdownFiles())('%s links only to files that exist', (file) => {
    for (const [, target] of read(file).matchAll(/\]\(((?!https?:)[^)#\s]+)(?:#[^)]*)?\)/g))
      expect(existsSync(join(repoRoot, dirname(file), target!)), `${file} -> ${target}`).toBe(true);
  });
});

describe('README.md', () => {
  it('is a front door: at most ~250 lines, no generated tables', () => {
    const readme = read('README.md');
    expect(readme.split('\n').length).toBeLessThanOrEqual(260);
    expect(readme).not.toMatch(/<!-- (flags|metrics|bench):start -->/);
  });
});

/** CONTRIBUTING.md's layout: each folder and its floor (`-` for a folder without code). */
function layout(): Map<string, number | undefined> {
  const section = read('CONTRIBUTING.md').split('\n## Layout\n')[1]!.split('\n## ')[0]!;
  const rows = [...section.matchAll(/^\| (\d+|-) \| \[([\w-]+)\/\]/gm)];
  return new Map(rows.map(([, floor, folder]) => [folder!, floor === '-' ? undefined : Number(floor)]));
}

/** The folder under the root that a relative import of `file` reaches, or undefined outside any. */
function folderImported(file: string, specifier: string): string | undefined {
  const target = relative(repoRoot, join(repoRoot, dirname(file), specifier));
  return target.includes('/') && !target.startsWith('..') ? target.split('/')[0] : undefined;
}

describe('CONTRIBUTING.md layout', () => {
  const folders = layout();

  it('lists every folder of the repository, and none that is gone', () => {
    const present = readdirSync(repoRoot, { withFileTypes: true })
      .filter(
        (e) =>
          e.isDirectory() && !e.name.startsWith('.') && !['node_modules', 'dist', 'build', 'coverage'].includes(e.name),
      )
      .map((e) => e.name)
      .sort();
    expect([...folders.keys()].sort()).toEqual(present);
  });

  it.each(codeFolders)('%s imports only from its own folder and lower floors', (folder) => {
    const floor = folders.get(folder);
    expect(floor, `${folder}/ has a floor in CONTRIBUTING.md's layout`).toBeTypeOf('number');
    const upwards = sourceFiles(folder).flatMap((file) =>
      [...read(file).matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].flatMap(([, specifier]) => {
        const to = folderImported(file, specifier!);
        if (to === undefined || to === folder) return [];
        const toFloor = folders.get(to);
        return toFloor !== undefined && toFloor < floor! ? [] : [`${file} -> ${to}/ (floor ${toFloor ?? '?'})`];
      }),
    );
    expect(upwards, `imports from floor ${floor} that do not run down`).toEqual([]);
  });
});

describe("CONTRIBUTING.md's Words", () => {
  it.each(['agent', 'hub'])('name every exported class of %s/', (folder) => {
    const words = read('CONTRIBUTING.md').split('\n## Words\n')[1]!.split('\n## ')[0]!;
    const named = new Set([...words.matchAll(/`(\w+)`/g)].map(([, name]) => name));
    const classes = sourceFiles(folder).flatMap((file) =>
      [...read(file).matchAll(/^export (?:abstract )?class (\w+)/gm)].map(([, name]) => `${file}: ${name}`),
    );
    expect(classes.length).toBeGreaterThan(3);
    expect(classes.filter((c) => !named.has(c.split(': ')[1]))).toEqual([]);
  });
});
