// Results: every figure sits next to a baseline measured in the same run, as a ratio, so a table
// from a noisy machine still says something. Written as JSON (for tools) and Markdown (for people).
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { resultsSvg } from './chart.js';
import { fmt, type Row } from './row.js';

export class Report {
  readonly rows: Row[] = [];
  readonly notes: string[] = [];
  private readonly started = new Date();

  add(row: Omit<Row, 'ratio'>): Row {
    const full: Row = {
      ...row,
      ratio: row.baseline && row.baseline.value !== 0 ? row.value / row.baseline.value : undefined,
    };
    this.rows.push(full);
    const base = full.baseline
      ? `   vs ${full.baseline.subject} ${fmt(full.baseline.value)}${full.ratio === undefined ? '' : ` (x${fmt(full.ratio)})`}`
      : '';
    const target = full.target ? `   target ${full.target.text}: ${full.target.met ? 'met' : 'NOT met'}` : '';
    console.log(`  [${row.section}] ${row.metric} | ${row.subject}: ${fmt(row.value)} ${row.unit}${base}${target}`);
    return full;
  }

  note(text: string): void {
    this.notes.push(text);
    console.log(`  note: ${text}`);
  }

  /**
   * Writes `<name>.json`, `.md` and `.svg` in `dir`. `goReference`: the Go binaries' folder, or why there
   * are none (env.ts goReferenceNote). `commit`: what was measured (README.md names it).
   */
  write(
    dir: string,
    name: string,
    args: string[],
    seconds: number,
    goReference: { found: boolean; note: string },
    commit?: string,
  ): void {
    mkdirSync(dir, { recursive: true });
    const machine = {
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model,
      memGiB: +(os.totalmem() / 2 ** 30).toFixed(1),
      node: process.version,
      kernel: os.release(),
    };
    const json = {
      started: this.started.toISOString(),
      commit,
      seconds: Math.round(seconds),
      args,
      goReference: goReference.found,
      machine,
      rows: this.rows,
      notes: this.notes,
    };
    writeFileSync(join(dir, `${name}.json`), `${JSON.stringify(json, null, 2)}\n`);
    writeFileSync(join(dir, `${name}.md`), this.markdown(json.started, machine, args, seconds, goReference, name));
    writeFileSync(
      join(dir, `${name}.svg`),
      resultsSvg(this.rows, `spoke-agent bench, ${json.started.slice(0, 10)}: ours against the references`),
    );
  }

  private markdown(
    started: string,
    machine: Record<string, unknown>,
    args: string[],
    seconds: number,
    goReference: { found: boolean; note: string },
    name: string,
  ): string {
    const lines = [
      `# spoke-agent bench: ${name} results`,
      '',
      `Run ${started} (${Math.round(seconds)} s, \`npm run bench${args.length ? ` -- ${args.join(' ')}` : ''}\`), ${machine.cpus} x ${machine.cpuModel}, Node ${machine.node}, Go reference binaries: ${goReference.found ? 'yes' : `no: ${goReference.note}`}.`,
      'Each ratio is value / baseline, both measured in this run. See bench/README.md for what each figure means.',
      '',
      `![ours against the references, as ratios](${name}.svg)`,
      '',
    ];
    lines.push('## Targets', '', ...targetsTable(this.rows), '');
    for (const section of [...new Set(this.rows.map((r) => r.section))]) {
      lines.push(
        `## ${section}`,
        '',
        '| metric | subject | value | baseline | ratio | target |',
        '|---|---|---:|---|---:|---|',
      );
      for (const r of this.rows.filter((x) => x.section === section)) {
        const base = r.baseline ? `${r.baseline.subject}: ${fmt(r.baseline.value)}` : '';
        const target = r.target ? `${r.target.met ? 'met' : '**not met**'}: ${r.target.text}` : '';
        lines.push(
          `| ${r.metric}${r.note ? ` (${r.note})` : ''} | ${r.subject} | ${fmt(r.value)} ${r.unit} | ${base} | ${r.ratio === undefined ? '' : `x${fmt(r.ratio)}`} | ${target} |`,
        );
      }
      lines.push('');
    }
    if (this.notes.length) lines.push('## Notes', '', ...this.notes.map((n) => `- ${n}`), '');
    return lines.join('\n');
  }
}

/** Every row with a target, met or not, as a Markdown table (latest.md and README.md's benchmark section). */
export function targetsTable(rows: readonly Row[]): string[] {
  const out = ['| target | figure | spoke-agent | reference, same run | ratio | met |', '|---|---|---:|---:|---:|---|'];
  for (const r of rows.filter((x) => x.target)) {
    const base = r.baseline ? `${r.baseline.subject}: ${fmt(r.baseline.value)}` : '';
    out.push(
      `| ${r.target!.text} | ${r.section}: ${r.metric} [${r.subject}] | ${fmt(r.value)} ${r.unit} | ${base} | ${r.ratio === undefined ? '' : `x${fmt(r.ratio)}`} | ${r.target!.met ? 'met' : '**not met**'} |`,
    );
  }
  return out;
}

/** p-th percentile (0..100) of samples, nearest rank. */
export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export const MiB = 2 ** 20;
export const GiB = 2 ** 30;
