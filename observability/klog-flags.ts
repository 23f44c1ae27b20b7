// klog's flags, which the Go agent's binary takes (cluster-proxy's additionalArgs may pass any of them).
// spoke-agent logs through pino to standard output, which is what klog does with its default
// --logtostderr=true; under that default klog ignores its file and header flags too, so they are
// accepted here with the same (lack of) effect. Only asking for klog's log files is refused: those
// logs would be lost without a word.
import { bool, int, str } from '../flags/flags.js';

const noEffect = { ignored: true } as const;

export const klogFlags = {
  v: int('v', 0, 'klog verbosity; 4 or more turns --log-level to debug when --log-level is not given.'),
  logtostderr: bool('logtostderr', true, 'klog: log to standard error instead of files.', {
    ...noEffect,
    validate: (v) =>
      v ? undefined : 'spoke-agent writes its logs to standard output only; klog log files are not supported',
  }),
  alsologtostderr: bool('alsologtostderr', false, 'klog: log to standard error as well as files.', noEffect),
  alsologtostderrthreshold: str('alsologtostderrthreshold', '', 'klog: threshold for --alsologtostderr.', noEffect),
  stderrthreshold: str('stderrthreshold', '2', 'klog: threshold when writing to files and stderr.', noEffect),
  legacyStderrThresholdBehavior: bool(
    'legacy-stderr-threshold-behavior',
    true,
    'klog: whether --stderrthreshold is ignored with --logtostderr.',
    noEffect,
  ),
  logDir: str('log-dir', '', 'klog: log file directory (no effect with --logtostderr, as in klog).', noEffect),
  logFile: str('log-file', '', 'klog: log file (no effect with --logtostderr, as in klog).', noEffect),
  logFileMaxSize: int(
    'log-file-max-size',
    1800,
    'klog: log file size limit in MB (no effect with --logtostderr).',
    noEffect,
  ),
  addDirHeader: bool('add-dir-header', false, 'klog: file directory in log headers.', noEffect),
  skipHeaders: bool('skip-headers', false, 'klog: no header prefixes.', noEffect),
  skipLogHeaders: bool('skip-log-headers', false, 'klog: no headers in log files.', noEffect),
  oneOutput: bool('one-output', false, 'klog: write each line at its own severity only.', noEffect),
  logBacktraceAt: str('log-backtrace-at', ':0', 'klog: stack trace at file:N.', noEffect),
  vmodule: str('vmodule', '', 'klog: per-file verbosity (pattern=N,...).', noEffect),
};
