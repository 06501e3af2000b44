import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type Redis from 'ioredis';

/**
 * CPU time spent so far by each process a measurement involves, in microseconds: this Node process
 * (`process.cpuUsage`, all its threads), the Redis server (`INFO cpu`: `used_cpu_user + used_cpu_sys`) and,
 * when it runs on this machine, the broker (`/proc/<pid>/stat`: `utime + stime`). Two readings around a
 * measurement say which side was busy: on a machine where they all share a few cores, msg/s follows the
 * sum, not any one of them.
 */
export interface CpuReading {
  readonly nodeUs: number;
  /** `undefined` when the server refuses `INFO` (a managed Redis may rename or disable it). */
  readonly redisUs?: number;
  /** `undefined` when the broker is not a process of this machine that the meter could find. */
  readonly brokerUs?: number;
}

/** CPU time per message between two readings, µs. */
export interface CpuPerMessage {
  readonly node: number;
  readonly redis?: number;
  readonly broker?: number;
}

/** Reads {@link CpuReading}s for one Redis server and, optionally, one broker process. */
export class CpuMeter {
  constructor(
    private readonly redis: Redis,
    private readonly brokerPid?: number,
  ) {}

  /** A meter on the same Redis server that also reads the broker process `pid` (if any). */
  withBroker(pid: number | undefined): CpuMeter {
    return new CpuMeter(this.redis, pid);
  }

  async read(): Promise<CpuReading> {
    const node = process.cpuUsage();
    const info = await this.redis.info('cpu').catch(() => '');
    const seconds = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
    const redisUs = (seconds('used_cpu_user') + seconds('used_cpu_sys')) * 1e6;
    const brokerUs = this.brokerPid === undefined ? undefined : processCpuUs(this.brokerPid);
    return {
      nodeUs: node.user + node.system,
      ...(Number.isFinite(redisUs) ? { redisUs } : {}),
      ...(brokerUs === undefined ? {} : { brokerUs }),
    };
  }
}

/** CPU time per message between `before` and `after`, over `messages` messages. */
export function cpuPerMessage(before: CpuReading, after: CpuReading, messages: number): CpuPerMessage {
  const per = (a: number | undefined, b: number | undefined) =>
    a !== undefined && b !== undefined ? (b - a) / messages : undefined;
  const redis = per(before.redisUs, after.redisUs);
  const broker = per(before.brokerUs, after.brokerUs);
  return {
    node: (after.nodeUs - before.nodeUs) / messages,
    ...(redis === undefined ? {} : { redis }),
    ...(broker === undefined ? {} : { broker }),
  };
}

let ticksPerSecond: number | undefined;

/** Clock ticks per second of `/proc/<pid>/stat` (`getconf CLK_TCK`, 100 on Linux when getconf is absent). */
function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** The fields of `/proc/<pid>/stat` after the command name (which may contain spaces). */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** User + system CPU time of process `pid` so far, µs; `undefined` when it cannot be read (not Linux, gone). */
export function processCpuUs(pid: number): number | undefined {
  const f = statFields(pid);
  if (!f) return undefined;
  // After the name: state(0) ppid(1) pgrp(2) ... utime(11) stime(12), in clock ticks (proc(5)).
  return ((Number(f[11]) + Number(f[12])) * 1e6) / clockTicks();
}

/**
 * The process of this machine whose command name is `name` (`/proc/<pid>/comm`), optionally only within
 * process group `processGroup`; `undefined` when there is none, or more than one (which would be a guess).
 */
export function findProcess(name: string, processGroup?: number): number | undefined {
  let entries: string[];
  try {
    entries = readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return undefined;
  }
  const found = entries.map(Number).filter((pid) => {
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() !== name) return false;
    } catch {
      return false;
    }
    return processGroup === undefined || Number(statFields(pid)?.[2]) === processGroup;
  });
  return found.length === 1 ? found[0] : undefined;
}
