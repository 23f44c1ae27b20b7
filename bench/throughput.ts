// Bulk download from a target (target -> agent -> hub -> client, the anchor's direction): one stream
// of 1 GiB, and 16 parallel streams, for every subject; the agent's CPU seconds per GiB from /proc.
import type { Duplex } from 'node:stream';
import type { Targets, Route } from './env.js';
import { GiB, MiB, type Report } from './report.js';
import type { Subject, Subjects } from './subjects.js';

/** Asks the source target for `bytes` and reads them all; resolves with the seconds it took after the dial. */
export async function download(route: Route, source: string, bytes: number): Promise<number> {
  const conn: Duplex = await route.dial(source);
  const started = performance.now();
  await new Promise<void>((resolve, reject) => {
    let got = 0;
    conn.on('data', (c: Buffer) => {
      got += c.length;
      if (got >= bytes) resolve();
    });
    conn.once('error', reject);
    conn.once('close', () =>
      got >= bytes ? resolve() : reject(new Error(`${route.name}: closed after ${got} of ${bytes} bytes`)),
    );
    const head = Buffer.alloc(8);
    head.writeBigUInt64BE(BigInt(bytes));
    conn.write(head);
  });
  const seconds = (performance.now() - started) / 1000;
  conn.destroy();
  return seconds;
}

interface Measured {
  single: number;
  parallel: number;
  cpuPerGiB?: number;
}

export async function runThroughput(
  report: Report,
  subjects: Subjects,
  targets: Targets,
  quick: boolean,
): Promise<void> {
  const single = quick ? 256 * MiB : GiB;
  const streams = 16;
  const each = (quick ? 16 : 64) * MiB;
  const results = new Map<Subject['role'] | string, Measured>();
  const section = 'Throughput';
  for (const subject of subjects.list()) {
    const m = await subject.use(async (s): Promise<Measured> => {
      await download(s.route, targets.source, 4 * MiB); // warm-up: JIT, TLS sessions, HTTP/2 windows
      const cpu0 = s.agent?.proc.cpuSeconds();
      const t1 = await download(s.route, targets.source, single);
      const cpu1 = s.agent?.proc.cpuSeconds();
      const started = performance.now();
      await Promise.all(Array.from({ length: streams }, () => download(s.route, targets.source, each)));
      const t16 = (performance.now() - started) / 1000;
      return {
        single: single / MiB / t1,
        parallel: (streams * each) / MiB / t16,
        cpuPerGiB: cpu0 === undefined ? undefined : (cpu1! - cpu0) / (single / GiB),
      };
    });
    results.set(subject.name, m);
    const direct = results.get('direct TCP')!;
    const isDirect = subject.role === 'direct';
    const vsDirect = (d: number) => (isDirect ? undefined : { subject: 'direct TCP', value: d });
    report.add({
      section,
      metric: `download ${single / MiB} MiB, 1 stream`,
      subject: subject.name,
      value: m.single,
      unit: 'MiB/s',
      baseline: vsDirect(direct.single),
    });
    report.add({
      section,
      metric: `download ${streams} x ${each / MiB} MiB in parallel`,
      subject: subject.name,
      value: m.parallel,
      unit: 'MiB/s',
      baseline: vsDirect(direct.parallel),
    });
    if (m.cpuPerGiB !== undefined)
      report.add({
        section,
        metric: 'agent CPU per GiB (1 stream)',
        subject: subject.name,
        value: m.cpuPerGiB,
        unit: 's/GiB',
      });
    if (subject.role === 'ours@go-hub') {
      const go = [...results.entries()].find(([name]) => name.includes('Go agent'))?.[1];
      if (go) {
        report.add({
          section,
          metric: `download ${single / MiB} MiB, 1 stream: our agent vs Go agent behind the same Go proxy-server`,
          subject: subject.name,
          value: m.single,
          unit: 'MiB/s',
          baseline: { subject: 'Go agent', value: go.single },
          target: { text: '>= 1.5x the Go agent', met: m.single >= 1.5 * go.single },
        });
        report.add({
          section,
          metric: `download ${streams} x ${each / MiB} MiB: our agent vs Go agent`,
          subject: subject.name,
          value: m.parallel,
          unit: 'MiB/s',
          baseline: { subject: 'Go agent', value: go.parallel },
          target: { text: '>= 1.5x the Go agent', met: m.parallel >= 1.5 * go.parallel },
        });
        if (go.cpuPerGiB !== undefined && m.cpuPerGiB !== undefined)
          report.add({
            section,
            metric: 'agent CPU per GiB: ours vs Go',
            subject: subject.name,
            value: m.cpuPerGiB,
            unit: 's/GiB',
            baseline: { subject: 'Go agent', value: go.cpuPerGiB },
          });
      }
    }
  }
}
