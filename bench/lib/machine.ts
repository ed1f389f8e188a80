import { execFileSync } from 'node:child_process';
import { cpus, freemem, totalmem } from 'node:os';
import { readFileSync } from 'node:fs';

export interface Machine {
  nproc: number;
  cpuModel: string;
  memTotal: string;
  memFree: string;
  freeH: string;
  node: string;
  kernel: string;
  loadAvgAtStart: string;
}

const sh = (cmd: string, args: string[], trim = true) => {
  try {
    const out = execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return trim ? out.trim() : out.replace(/\n+$/, '');
  } catch {
    return '';
  }
};

export function describeMachine(): Machine {
  const cpuinfo = (() => {
    try {
      return readFileSync('/proc/cpuinfo', 'utf8');
    } catch {
      return '';
    }
  })();
  const gib = (b: number) => `${(b / 2 ** 30).toFixed(1)} GiB`;
  return {
    nproc: Number(sh('nproc', [])) || cpus().length,
    cpuModel: /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1] ?? cpus()[0]?.model ?? 'unknown',
    memTotal: gib(totalmem()),
    memFree: gib(freemem()),
    freeH: sh('free', ['-h'], false),
    node: process.version,
    kernel: sh('uname', ['-sr']),
    loadAvgAtStart: sh('cat', ['/proc/loadavg']).split(' ').slice(0, 3).join(' '),
  };
}
