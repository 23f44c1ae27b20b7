// What the dial log costs: our agent behind our hub with --dial-log-size=1000 (the default) and with
// 0, in paired rounds in the same run (a fresh agent process each time, the two in turn as the hub's
// only agent): the dial rate (dial, 1 B each way, close; 16 in flight), where the log records two
// changes per dial, and a single-stream download, where it must cost nothing per packet.
import { hubRoute, startOurAgent, startOurHub, type TestPki, type Targets } from './env.js';
import { dialRate } from './latency.js';
import { medianRound, pairedRounds } from './paired.js';
import { MiB, type Report } from './report.js';
import { download } from './throughput.js';

interface Figures {
  dialsPerSecond: number;
  mibPerSecond: number;
}

export async function runDialLog(report: Report, pki: TestPki, targets: Targets, quick: boolean): Promise<void> {
  const section = 'Dial log';
  const [rounds, rateMs, bytes] = quick ? [2, 1500, 128 * MiB] : [5, 4000, 512 * MiB];
  const hub = await startOurHub(pki);
  try {
    const route = hubRoute('our hub (grpc)', pki, hub, 'grpc');
    const measure = async (size: number): Promise<Figures> => {
      const agent = await startOurAgent(pki, hub, [`--dial-log-size=${size}`]);
      try {
        const subject = { route, agent, hub };
        await dialRate(subject, targets.echo, 16, 500); // warm-up: JIT, TLS sessions
        const { rate } = await dialRate(subject, targets.echo, 16, rateMs);
        await download(route, targets.source, 4 * MiB);
        const seconds = await download(route, targets.source, bytes);
        return { dialsPerSecond: rate, mibPerSecond: bytes / MiB / seconds };
      } finally {
        await agent.proc.stop();
      }
    };
    const paired = await pairedRounds(rounds, 0, 1000, measure);
    const off = { subject: '--dial-log-size=0' };
    const dials = medianRound(paired, (f) => f.dialsPerSecond);
    if (dials) {
      const [on, base, all] = dials;
      report.add({
        section,
        metric: `dial rate (dial, 1 B each way, close; 16 in flight), median of ${rounds} paired rounds (${all})`,
        subject: 'our hub (grpc) + our agent, --dial-log-size=1000',
        value: on,
        unit: 'dials/s',
        baseline: { ...off, value: base },
        target: { text: '>= 0.95x with the log off', met: on >= 0.95 * base },
      });
    }
    const throughput = medianRound(paired, (f) => f.mibPerSecond);
    if (throughput) {
      const [on, base, all] = throughput;
      report.add({
        section,
        metric: `download ${bytes / MiB} MiB, 1 stream, median of ${rounds} paired rounds (${all})`,
        subject: 'our hub (grpc) + our agent, --dial-log-size=1000',
        value: on,
        unit: 'MiB/s',
        baseline: { ...off, value: base },
        target: { text: '>= 0.95x with the log off', met: on >= 0.95 * base },
      });
    }
  } finally {
    await hub.proc.stop();
  }
}
