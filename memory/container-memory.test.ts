import { describe, expect, it } from 'vitest';
import {
  containerMemoryLimit,
  heapFlags,
  mallocArenas,
  heapSizedByOperator,
  limitFiles,
  memoryCgroupPaths,
  parseCgroupMemoryLimit,
} from './container-memory.js';

const v2Only = '0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-abc.scope\n';
const v1 = [
  '12:pids:/kubepods/burstable/pod1/abc',
  '4:memory:/kubepods/burstable/pod1/abc',
  '3:cpu,cpuacct:/kubepods/burstable/pod1/abc',
  '1:name=systemd:/kubepods/burstable/pod1/abc',
  '',
].join('\n');
const hybrid = '4:memory:/process_api/6e67\n1:name=systemd:/\n0::/\n';

describe('parseCgroupMemoryLimit', () => {
  it('reads v2 memory.max and v1 memory.limit_in_bytes', () => {
    expect(parseCgroupMemoryLimit('268435456\n')).toBe(256 << 20);
    expect(parseCgroupMemoryLimit('max\n')).toBeUndefined();
    // v1 without a limit: LONG_MAX rounded down to a page.
    expect(parseCgroupMemoryLimit('9223372036854771712\n')).toBeUndefined();
    expect(parseCgroupMemoryLimit(undefined)).toBeUndefined();
    expect(parseCgroupMemoryLimit('')).toBeUndefined();
    expect(parseCgroupMemoryLimit('0\n')).toBeUndefined();
    expect(parseCgroupMemoryLimit('garbage')).toBeUndefined();
  });
});

describe('where the limit is', () => {
  it('finds the memory cgroup of v2, v1 and hybrid hierarchies', () => {
    expect(memoryCgroupPaths(v2Only)).toEqual({
      v2: '/kubepods.slice/kubepods-burstable.slice/cri-containerd-abc.scope',
    });
    expect(memoryCgroupPaths(v1)).toEqual({ v1: '/kubepods/burstable/pod1/abc' });
    expect(memoryCgroupPaths(hybrid)).toEqual({ v1: '/process_api/6e67', v2: '/' });
  });

  it('looks in the own cgroup, then at the mount root (a container sees its own cgroup there)', () => {
    expect(limitFiles('0::/\n')).toEqual(['/sys/fs/cgroup/memory.max']);
    expect(limitFiles(v1)).toEqual([
      '/sys/fs/cgroup/memory/kubepods/burstable/pod1/abc/memory.limit_in_bytes',
      '/sys/fs/cgroup/memory/memory.limit_in_bytes',
    ]);
  });

  it('takes the smallest limit among the files that exist', () => {
    const files: Record<string, string> = {
      '/proc/self/cgroup': hybrid,
      '/sys/fs/cgroup/memory.max': 'max\n',
      '/sys/fs/cgroup/memory/process_api/6e67/memory.limit_in_bytes': '268435456\n',
      '/sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712\n',
    };
    expect(containerMemoryLimit((p) => files[p])).toBe(256 << 20);
    // A v1 container whose cgroup is bind-mounted at the root: its own path does not exist there.
    expect(
      containerMemoryLimit(
        (p) => ({ '/proc/self/cgroup': v1, '/sys/fs/cgroup/memory/memory.limit_in_bytes': '134217728' })[p],
      ),
    ).toBe(128 << 20);
    expect(containerMemoryLimit(() => undefined)).toBeUndefined();
  });
});

describe('heapFlags', () => {
  it('leaves room in the limit for buffers and native memory', () => {
    expect(heapFlags(256 << 20)).toEqual(['--max-old-space-size=96', '--max-semi-space-size=4']);
    expect(heapFlags(64 << 20)).toEqual(['--max-old-space-size=32', '--max-semi-space-size=1']);
    expect(heapFlags(8 * 2 ** 30)).toEqual(['--max-old-space-size=3072', '--max-semi-space-size=4']);
    expect(heapFlags(undefined)).toEqual(['--max-semi-space-size=4']);
  });

  it('asks for two malloc arenas unless the operator chose', () => {
    expect(mallocArenas({ PATH: '/bin' })).toEqual({ PATH: '/bin', MALLOC_ARENA_MAX: '2' });
    expect(mallocArenas({ MALLOC_ARENA_MAX: '8' })).toBeUndefined();
  });

  it('is left to the operator who sized the heap', () => {
    expect(heapSizedByOperator(['--enable-source-maps'], '')).toBe(false);
    expect(heapSizedByOperator(['--max-old-space-size=512'])).toBe(true);
    expect(heapSizedByOperator([], '--enable-source-maps --max_old_space_size=300')).toBe(true);
    expect(heapSizedByOperator([], '--max-old-space-size-percentage=50')).toBe(true);
  });
});
